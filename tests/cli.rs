//! The `mpm` binary as a user runs it: subcommands, exit codes, messages, and Ctrl-C leaving
//! a checkpoint that a resumed run continues from.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod scratch;
use scratch::Scratch;

fn mpm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mpm"))
        .args(args)
        .env("MPM_BACKEND", "cpu")
        .output()
        .expect("the mpm binary runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(path)
        .display()
        .to_string()
}

/// `mpm run` honours `MPM_BACKEND` when `--backend` is absent, and refuses a value it does
/// not know; both fail before the scene runs.
#[test]
fn run_reads_mpm_backend() {
    let dir = Scratch::new("cli", "env-backend");
    let run = |backend: &str| {
        Command::new(env!("CARGO_BIN_EXE_mpm"))
            .args([
                "run",
                "--frames",
                "1",
                "--out",
                dir.to_str().expect("utf-8"),
            ])
            .env("MPM_BACKEND", backend)
            .env("MPM_VK_DEVICE", "no-such-gpu-anywhere")
            .output()
            .expect("the mpm binary runs")
    };
    let o = run("quantum");
    assert!(!o.status.success());
    assert!(
        text(&o).contains("unknown backend `quantum`"),
        "{}",
        text(&o)
    );
    // Vulkan as asked, on a device that does not exist: an error, not a run on auto's pick.
    let o = run("vulkan");
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("no-such-gpu-anywhere"), "{}", text(&o));
}

/// `--threads` is bounded: 0 and thousands are refused with a message, before anything runs.
#[test]
fn threads_are_bounded() {
    for (n, says) in [("0", "at least one thread"), ("100000", "cores")] {
        let o = mpm(&["run", "--backend", "cpu", "--threads", n, "--frames", "1"]);
        assert!(!o.status.success(), "--threads {n} ran: {}", text(&o));
        assert!(text(&o).contains(says), "{}", text(&o));
    }
}

/// Input that is not a regular file fails at once, naming it: a scene or a checkpoint that
/// is `/dev/zero` used to grow until the kernel killed the process.
#[test]
fn non_files_are_refused() {
    let o = mpm(&["run", "/dev/zero"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("/dev/zero") && text(&o).contains("not a regular file"),
        "{}",
        text(&o)
    );
    let dir = Scratch::new("cli", "resume-zero");
    let o = mpm(&[
        "run",
        "--resume",
        "/dev/zero",
        "--out",
        dir.to_str().expect("utf-8"),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("/dev/zero") && text(&o).contains("not a regular file"),
        "{}",
        text(&o)
    );
}

/// A run clears the temporary files a killed run left in its output folder, and leaves none
/// of its own.
#[test]
fn runs_clear_temporaries_left_by_killed_runs() {
    let dir = Scratch::new("cli", "stale-tmp");
    let stale = dir.join(".frame_0001.ply.4000000000.tmp");
    std::fs::write(&stale, b"half a frame").expect("write");
    let o = mpm(&[
        "run",
        "--frames",
        "1",
        "--out",
        dir.to_str().expect("utf-8"),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("removed 1 temporary file"),
        "{}",
        text(&o)
    );
    let left: Vec<String> = std::fs::read_dir(&dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn info_summarises_a_scene() {
    let o = mpm(&["info", &repo("scenes/dam_break.toml")]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("2D, grid [128, 128]"), "{t}");
    assert!(t.contains("particles in 2 bodies"), "{t}");
    assert!(t.contains("water") && t.contains("obstacle"), "{t}");
    // Options and colliders are named.
    let o = mpm(&["info", &repo("scenes/rubber_beam.toml")]);
    assert!(
        text(&o).contains("options: damping 38.91 1/s, F-bar"),
        "{}",
        text(&o)
    );
    let o = mpm(&["info", &repo("scenes/sand_wheel.toml")]);
    assert!(
        text(&o).contains("collider: distance field 0 at [0.5, 0.275, 0.5]"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_bad_scene_fails_with_its_position() {
    let dir = Scratch::new("cli", "bad");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[simulation]\ndimension = 4\nresolution = [8]\n").expect("write");
    let o = mpm(&[
        "run",
        bad.to_str().expect("utf-8 path"),
        "--out",
        dir.to_str().expect("utf-8"),
    ]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("error: ") && t.contains("bad.toml:"), "{t}");
    let missing = mpm(&["info", "/nonexistent/scene.toml"]);
    assert!(!missing.status.success());
    assert!(
        text(&missing).contains("cannot read it"),
        "{}",
        text(&missing)
    );
}

#[test]
fn devices_lists_or_explains() {
    let o = mpm(&["devices"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    // auto's pick is marked; a Vulkan device that runs on the CPU is not auto's pick.
    assert!(
        t.contains("<- auto")
            || t.contains("no Vulkan device")
            || (t.contains("(cpu)") && t.contains("`--backend auto` runs on the cpu")),
        "{t}"
    );
}

/// `mpm devices` marks the device `MPM_VK_DEVICE` selects, and fails when it names none.
#[test]
fn devices_checks_mpm_vk_device() {
    let devices = |want: &str| {
        Command::new(env!("CARGO_BIN_EXE_mpm"))
            .arg("devices")
            .env("MPM_VK_DEVICE", want)
            .output()
            .expect("the mpm binary runs")
    };
    let o = devices("99");
    if text(&o).contains("no Vulkan device") {
        return; // nothing to select from on this machine
    }
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("MPM_VK_DEVICE=99 matches none"),
        "{}",
        text(&o)
    );
    let o = devices("0");
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("<- MPM_VK_DEVICE"), "{}", text(&o));
}

/// `scenes/dam_break.toml` with a checkpoint after every frame, written into `dir`.
fn checkpointed_dam_break(dir: &Path) -> std::path::PathBuf {
    let source = std::fs::read_to_string(repo("scenes/dam_break.toml")).expect("scene");
    let scene = match source.contains("[output]") {
        true => source.replacen("[output]", "[output]\ncheckpoint_every = 1", 1),
        false => format!("{source}\n[output]\ncheckpoint_every = 1\n"),
    };
    let path = dir.join("scene.toml");
    std::fs::write(&path, scene).expect("write");
    path
}

/// Resuming with `--frames` at or below the checkpoint's frame is an error that says so (it
/// used to end at once, successfully, having done nothing).
#[test]
fn resuming_past_the_end_is_an_error() {
    let dir = Scratch::new("cli", "resume-past");
    let path = checkpointed_dam_break(&dir);
    let (scene, out) = (path.to_str().expect("utf-8"), dir.to_str().expect("utf-8"));
    let o = mpm(&["run", scene, "--frames", "2", "--out", out]);
    assert!(o.status.success(), "{}", text(&o));
    let checkpoint = dir.join("checkpoint.mpmck");
    let ck = checkpoint.to_str().expect("utf-8");
    for frames in ["1", "2"] {
        let o = mpm(&[
            "run", scene, "--frames", frames, "--out", out, "--resume", ck,
        ]);
        assert!(!o.status.success(), "--frames {frames}: {}", text(&o));
        assert!(text(&o).contains("nothing to run"), "{}", text(&o));
    }
}

/// `mpm run` launches its kernels from its main thread, which becomes one of the global
/// pool's threads (`CpuBackend::on_main_thread`: no hand-over and no wake-up per launch).
/// The run gives the bits of the same run on a pool of its own of as many threads (here, in
/// this test's thread, which is not a program's main thread), and the backend says so.
#[test]
fn the_main_thread_among_the_workers_gives_the_same_bits() {
    let dir = Scratch::new("cli", "main-thread-pool");
    let path = checkpointed_dam_break(&dir);
    let (ours, theirs) = (dir.join("main"), dir.join("pool"));
    let o = mpm(&[
        "run",
        path.to_str().expect("utf-8"),
        "--backend",
        "cpu",
        "--threads",
        "2",
        "--frames",
        "3",
        "--out",
        ours.to_str().expect("utf-8"),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("cpu (2 threads"), "{}", text(&o));
    mpm::commands::run(&mpm::commands::RunOptions {
        scene: Some(path.clone()),
        backend: Some(mpm::backend::Choice::Cpu),
        frames: Some(3),
        out: Some(theirs.clone()),
        resume: None,
        threads: Some(2),
        view: false,
        energy: false,
        rebalance_every: 10,
    })
    .unwrap_or_else(|e| panic!("the in-process run failed: {e}"));
    let read = |d: &Path| std::fs::read(mpm::commands::checkpoint_path(d)).expect("checkpoint");
    let (a, b) = (read(&ours), read(&theirs));
    assert!(a.len() > 1000, "a checkpoint of {} bytes", a.len());
    assert!(
        a == b,
        "the main thread's pool and a pool of its own differ"
    );
    // Off the main thread it is a pool of its own, of the size asked.
    let own = mpm::CpuBackend::on_main_thread(Some(3)).expect("a pool of 3 threads");
    assert!(
        mpm::Backend::describe(&own).contains("3 threads"),
        "{}",
        mpm::Backend::describe(&own)
    );
}

#[test]
fn bench_prints_a_table() {
    let o = mpm(&[
        "bench",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--backends",
        "cpu",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    for scene in ["mpm99", "mpm3d 64^3", "dam_break (solver)"] {
        assert!(t.contains(scene), "{scene} missing from:\n{t}");
    }
}

/// Starts a long CPU run into `dir`, waits until it wrote `frame`, then sends it `signal`
/// (as `kill -SIGNAL` does) and returns what it printed and its exit status.
fn interrupt(dir: &Path, frame: &str, signal: &str) -> Output {
    let mut run = Command::new(env!("CARGO_BIN_EXE_mpm"));
    run.args(["run", "--backend", "cpu", "--frames", "1000", "--out"])
        .arg(dir);
    interrupt_after(run, &dir.join(frame), Duration::ZERO, signal)
}

/// Starts `run`, waits until `ready` exists and then `settle` more, sends it `signal` and
/// returns what it printed and its exit status.
fn interrupt_after(mut run: Command, ready: &Path, settle: Duration, signal: &str) -> Output {
    let child = run
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpm runs");
    let start = Instant::now();
    while !ready.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{} never appeared",
            ready.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(settle);
    let sent = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    child.wait_with_output().expect("mpm ends")
}

#[test]
fn ctrl_c_leaves_a_checkpoint_to_resume_from() {
    let dir = Scratch::new("cli", "interrupt");
    let out = dir.to_str().expect("utf-8 path");
    // Interrupt it after a few frames, as Ctrl-C would.
    let o = interrupt(&dir, "frame_00002.png", "INT");
    let t = text(&o);
    assert_eq!(
        o.status.code(),
        Some(130),
        "an interrupted run exits with 130: {t}"
    );
    assert!(t.contains("interrupted, resume with --resume"), "{t}");
    let checkpoint = dir.join("checkpoint.mpmck");
    assert!(checkpoint.is_file(), "no checkpoint after Ctrl-C: {t}");
    let frames = std::fs::read_dir(&dir)
        .expect("list")
        .filter(|e| {
            e.as_ref()
                .map(|e| e.file_name().to_string_lossy().ends_with(".png"))
                .unwrap_or(false)
        })
        .count();
    // Resuming continues after the frames already written.
    let o = mpm(&[
        "run",
        "--backend",
        "cpu",
        "--frames",
        &(frames + 1).to_string(),
        "--out",
        out,
        "--resume",
        checkpoint.to_str().expect("utf-8"),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).starts_with("1 frames"), "{}", text(&o));
    assert!(dir.join(format!("frame_{frames:05}.png")).is_file());
}

/// SIGTERM and SIGHUP end a run as Ctrl-C does: a checkpoint, and exit status 130.
#[test]
fn term_and_hup_leave_a_checkpoint() {
    for signal in ["TERM", "HUP"] {
        let dir = Scratch::new("cli", &format!("signal-{signal}"));
        let o = interrupt(&dir, "frame_00001.png", signal);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(130), "SIG{signal}: {t}");
        assert!(
            dir.join("checkpoint.mpmck").is_file(),
            "SIG{signal}: no checkpoint: {t}"
        );
    }
}

#[test]
fn view_without_a_display_runs_headless() {
    let dir = Scratch::new("cli", "headless");
    let o = Command::new(env!("CARGO_BIN_EXE_mpm"))
        .args(["run", "--view", "--backend", "cpu", "--frames", "1"])
        .args(["--out", dir.to_str().expect("utf-8")])
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("WAYLAND_SOCKET")
        .output()
        .expect("mpm runs");
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("no display for --view"), "{t}");
    assert!(dir.join("frame_00000.png").is_file());
}

/// The window path, on a virtual X display (scripts/setup.sh installs Xvfb).
#[test]
fn view_opens_a_window_on_a_display() {
    let display = format!(":{}", 50 + std::process::id() % 200);
    let mut xvfb = match Command::new("Xvfb")
        .args([&display, "-screen", "0", "640x640x24", "-nolisten", "tcp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(x) => x,
        Err(e) => panic!("Xvfb is needed for this test (scripts/setup.sh installs it): {e}"),
    };
    std::thread::sleep(Duration::from_millis(1500));
    let dir = Scratch::new("cli", "window");
    let o = Command::new(env!("CARGO_BIN_EXE_mpm"))
        .args(["run", "--view", "--backend", "cpu", "--frames", "3"])
        .args(["--out", dir.to_str().expect("utf-8")])
        .env("DISPLAY", &display)
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .expect("mpm runs");
    let _ = xvfb.kill();
    let _ = xvfb.wait();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(!t.contains("no display"), "the window did not open: {t}");
    assert!(t.starts_with("3 frames"), "{t}");
}

/// `--energy` prints one energy line per frame; the dam break's total (APIC dissipates, the
/// walls do no work) never grows.
#[test]
fn energy_report_prints_every_frame() {
    let dir = Scratch::new("cli", "energy");
    let o = mpm(&[
        "run",
        "--frames",
        "3",
        "--energy",
        "--out",
        dir.to_str().expect("utf-8"),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    let totals: Vec<f64> = t
        .lines()
        .filter(|l| l.starts_with("frame "))
        .map(|l| {
            let at = l.find("total ").expect("a total") + "total ".len();
            l[at..]
                .split_whitespace()
                .next()
                .expect("a number")
                .parse()
                .expect("a float")
        })
        .collect();
    assert_eq!(totals.len(), 3, "{t}");
    assert!(
        totals.windows(2).all(|w| w[1] <= w[0] + 1e-3 * w[0].abs()),
        "energy grew: {totals:?}"
    );
}

/// The figure (MiB) that follows `after` in a run's output `t`.
fn mib(t: &str, after: &str) -> f64 {
    let at = t
        .find(after)
        .unwrap_or_else(|| panic!("no `{after}` in:\n{t}"))
        + after.len();
    let rest = t[at..].trim_start();
    let end = rest.find(' ').unwrap_or(rest.len());
    rest[..end]
        .parse()
        .unwrap_or_else(|_| panic!("no number after `{after}` in:\n{t}"))
}

/// The run's summary reports measured memory next to the engine's count of its fields: the
/// process's peak resident memory, which holds the fields on the CPU backend, and the
/// device's peak on Vulkan, which holds them there. (It once said 214.5 MiB for a process
/// that peaked at 660 MB.)
#[test]
fn run_reports_measured_memory() {
    let dir = Scratch::new("cli", "memory");
    for backend in ["cpu", "vulkan"] {
        let o = mpm(&[
            "run",
            &repo("scenes/mpm88.toml"),
            "--backend",
            backend,
            "--frames",
            "1",
            "--out",
            dir.to_str().expect("utf-8"),
        ]);
        let t = text(&o);
        let gpu_required = std::env::var("MPM_REQUIRE_GPU").as_deref() == Ok("1");
        if backend == "vulkan" && !o.status.success() && !gpu_required && t.contains("no Vulkan") {
            eprintln!("skipped on Vulkan, no device: {t}");
            continue;
        }
        assert!(o.status.success(), "{t}");
        let fields = mib(&t, "peak field memory");
        let process = mib(&t, "process peak");
        assert!(fields > 0.0 && process > fields, "{t}");
        if backend == "vulkan" {
            assert!(mib(&t, "device peak") >= fields, "{t}");
        }
    }
}

/// A run interrupted before its first frame ends still reports the memory its fields held
/// (the peak was once sampled at frame ends only, and such a run said 0.0 MiB).
#[test]
fn run_interrupted_in_its_first_frame_reports_its_memory() {
    let dir = Scratch::new("cli", "first-frame");
    // 100,000 substeps to the first frame: seconds, long after the signal.
    let scene = dir.join("slow.toml");
    std::fs::write(
        &scene,
        "[simulation]\ndimension = 2\nresolution = [28, 28]\ndx = 0.05\ndt = 1e-6\n\
         frame_time = 0.1\nframes = 2\n\n[[materials]]\nname = \"rubber\"\n\
         model = \"neo-hookean\"\n\n[[bodies]]\nmaterial = \"rubber\"\nshape = \"sphere\"\n\
         centre = [0.7, 0.7]\nradius = 0.2\n",
    )
    .expect("scene written");
    let out = dir.join("out");
    let mut run = Command::new(env!("CARGO_BIN_EXE_mpm"));
    run.args(["run", "--backend", "cpu", "--out"])
        .arg(&out)
        .arg(&scene);
    // The output folder is made after the signal handlers are in place.
    let o = interrupt_after(run, &out, Duration::from_millis(500), "INT");
    let t = text(&o);
    assert_eq!(o.status.code(), Some(130), "{t}");
    assert!(t.starts_with("0 frames"), "{t}");
    assert!(mib(&t, "peak field memory") > 0.0, "{t}");
}

/// Frames of an earlier, longer run that this run will not overwrite are named in a warning.
#[test]
fn stale_frames_of_an_earlier_run_are_named() {
    let dir = Scratch::new("cli", "stale");
    std::fs::write(dir.join("frame_00007.png"), b"old").expect("old frame");
    let o = mpm(&[
        "run",
        &repo("scenes/mpm88.toml"),
        "--backend",
        "cpu",
        "--frames",
        "1",
        "--out",
        dir.to_str().expect("utf-8"),
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains(
            "1 frame file(s) of an earlier, longer run (frame_00007.png .. frame_00007.png)"
        ),
        "{t}"
    );
}

/// Output into a pipe whose reader has gone (`mpm info | head -1`) ends the program quietly,
/// killed by SIGPIPE as other Unix tools are, instead of a panic on the next print.
#[cfg(unix)]
#[test]
fn a_closed_output_pipe_ends_the_program_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let mut child = Command::new(env!("CARGO_BIN_EXE_mpm"))
        .args(["info", &repo("scenes/multi_material_3d.toml")])
        .env("MPM_BACKEND", "cpu")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the mpm binary runs");
    // Close the reading end before the program prints.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("mpm ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        out.status.signal(),
        Some(13),
        "ended by SIGPIPE: {:?}",
        out.status
    );
}
