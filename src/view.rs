//! The live view of `mpm run --view`: a window (winit) that shows each frame as it is
//! simulated (softbuffer blits it), and passes mouse input back to the run.
//!
//! Left click: emit water at the cursor. Right drag: push material with a sphere that follows
//! the cursor. Without a display the caller is told so and runs headless.

use std::num::NonZeroU32;
use std::rc::Rc;

use image::RgbImage;
use winit::application::ApplicationHandler;
use winit::dpi::{LogicalSize, PhysicalPosition};
use winit::event::{ElementState, MouseButton, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoop};
use winit::window::{Window, WindowId};

type AnyError = Box<dyn std::error::Error>;

/// What the user did since the last frame, in picture coordinates: the unit square, y up.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Input {
    pub clicks: Vec<[f32; 2]>,
    /// Where the cursor is while the right button is held.
    pub drag: Option<[f32; 2]>,
}

/// How a view ended.
#[derive(Debug)]
pub enum Shown {
    /// The run produced its last frame.
    Finished,
    /// The user closed the window.
    Closed,
    /// No window could be opened (no display); nothing ran.
    NoDisplay(String),
}

/// The next frame's picture, or `None` when the run is over.
pub type NextFrame<'a> = dyn FnMut(&Input) -> Result<Option<RgbImage>, AnyError> + 'a;

/// Shows frames from `next` until it returns `None` or the window is closed.
pub fn show(title: &str, size: u32, next: &mut NextFrame<'_>) -> Result<Shown, AnyError> {
    let event_loop = match EventLoop::new() {
        Ok(l) => l,
        Err(e) => return Ok(Shown::NoDisplay(e.to_string())),
    };
    event_loop.set_control_flow(ControlFlow::Poll);
    let mut app = App {
        title: title.into(),
        size,
        next,
        window: None,
        surface: None,
        cursor: None,
        right_held: false,
        input: Input::default(),
        outcome: None,
    };
    event_loop.run_app(&mut app)?;
    match app.outcome {
        Some(Ok(shown)) => Ok(shown),
        Some(Err(e)) => Err(e),
        None => Ok(Shown::Closed),
    }
}

struct App<'a, 'b> {
    title: String,
    size: u32,
    next: &'a mut NextFrame<'b>,
    window: Option<Rc<Window>>,
    surface: Option<softbuffer::Surface<Rc<Window>, Rc<Window>>>,
    /// Cursor position in physical pixels.
    cursor: Option<PhysicalPosition<f64>>,
    right_held: bool,
    input: Input,
    outcome: Option<Result<Shown, AnyError>>,
}

impl App<'_, '_> {
    fn stop(&mut self, event_loop: &ActiveEventLoop, outcome: Result<Shown, AnyError>) {
        self.outcome.get_or_insert(outcome);
        event_loop.exit();
    }

    /// The cursor in picture coordinates.
    fn cursor_in_picture(&self) -> Option<[f32; 2]> {
        let (window, c) = (self.window.as_ref()?, self.cursor?);
        let s = window.inner_size();
        Some([
            (c.x / s.width.max(1) as f64) as f32,
            1.0 - (c.y / s.height.max(1) as f64) as f32,
        ])
    }

    fn draw(&mut self, event_loop: &ActiveEventLoop) {
        self.input.drag = if self.right_held {
            self.cursor_in_picture()
        } else {
            None
        };
        let input = std::mem::take(&mut self.input);
        let picture = match (self.next)(&input) {
            Ok(Some(p)) => p,
            Ok(None) => return self.stop(event_loop, Ok(Shown::Finished)),
            Err(e) => return self.stop(event_loop, Err(e)),
        };
        if let Err(e) = self.present(&picture) {
            self.stop(event_loop, Err(e));
        }
    }

    /// Scales the picture to the window (nearest pixel) and shows it.
    fn present(&mut self, picture: &RgbImage) -> Result<(), AnyError> {
        let (Some(window), Some(surface)) = (&self.window, &mut self.surface) else {
            return Ok(());
        };
        let size = window.inner_size();
        let (Some(w), Some(h)) = (NonZeroU32::new(size.width), NonZeroU32::new(size.height)) else {
            return Ok(());
        };
        surface.resize(w, h)?;
        let mut buffer = surface.buffer_mut()?;
        let (pw, ph) = picture.dimensions();
        for y in 0..h.get() {
            let sy = (y as u64 * ph as u64 / h.get() as u64) as u32;
            for x in 0..w.get() {
                let sx = (x as u64 * pw as u64 / w.get() as u64) as u32;
                let [r, g, b] = picture.get_pixel(sx, sy).0;
                buffer[(y * w.get() + x) as usize] = (r as u32) << 16 | (g as u32) << 8 | b as u32;
            }
        }
        buffer.present()?;
        Ok(())
    }
}

impl ApplicationHandler for App<'_, '_> {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.window.is_some() {
            return;
        }
        let attributes = Window::default_attributes()
            .with_title(&self.title)
            .with_inner_size(LogicalSize::new(self.size, self.size));
        let opened = event_loop
            .create_window(attributes)
            .map_err(AnyError::from)
            .and_then(|w| {
                let w = Rc::new(w);
                let context = softbuffer::Context::new(w.clone())?;
                let surface = softbuffer::Surface::new(&context, w.clone())?;
                Ok((w, surface))
            });
        match opened {
            Ok((w, surface)) => {
                self.window = Some(w);
                self.surface = Some(surface);
            }
            Err(e) => self.stop(event_loop, Ok(Shown::NoDisplay(e.to_string()))),
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, _: WindowId, event: WindowEvent) {
        match event {
            WindowEvent::CloseRequested => self.stop(event_loop, Ok(Shown::Closed)),
            WindowEvent::CursorMoved { position, .. } => self.cursor = Some(position),
            WindowEvent::CursorLeft { .. } => self.cursor = None,
            WindowEvent::MouseInput { state, button, .. } => match (button, state) {
                (MouseButton::Left, ElementState::Pressed) => {
                    if let Some(p) = self.cursor_in_picture() {
                        self.input.clicks.push(p);
                    }
                }
                (MouseButton::Right, s) => self.right_held = s == ElementState::Pressed,
                _ => {}
            },
            WindowEvent::RedrawRequested => self.draw(event_loop),
            _ => {}
        }
    }

    fn about_to_wait(&mut self, _: &ActiveEventLoop) {
        if let Some(w) = &self.window {
            w.request_redraw();
        }
    }
}
