//! Fields: typed, shaped arrays that live on a backend.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::backend::{BackendRef, Buffer, FieldArg};
use crate::error::{Error, Result};
use crate::types::{from_words, to_words, Elem};

/// A dense field of `D` dimensions (0 to 3) holding elements of type `T`.
pub struct Field<T: Elem, const D: usize = 1> {
    backend: BackendRef,
    buffer: Arc<dyn Buffer>,
    shape: [u32; D],
    _t: PhantomData<T>,
}

impl<T: Elem, const D: usize> Field<T, D> {
    /// A zero-filled field of the given shape.
    pub fn new(backend: &BackendRef, shape: [u32; D]) -> Result<Self> {
        const { assert!(D <= 3, "fields have 0 to 3 dimensions") };
        let len: usize = shape.iter().map(|&s| s as usize).product();
        let buffer = backend.alloc(len * T::WORDS)?;
        Ok(Field {
            backend: backend.clone(),
            buffer,
            shape,
            _t: PhantomData,
        })
    }

    /// A field of the given shape filled with `data` (last axis fastest).
    pub fn from_slice(backend: &BackendRef, shape: [u32; D], data: &[T]) -> Result<Self> {
        let mut f = Self::new(backend, shape)?;
        f.upload(data)?;
        Ok(f)
    }

    pub fn shape(&self) -> [u32; D] {
        self.shape
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().map(|&s| s as usize).product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn backend(&self) -> &BackendRef {
        &self.backend
    }

    /// Bytes of device (or host) memory this field holds.
    pub fn bytes(&self) -> usize {
        self.buffer.words() * 4
    }

    /// Replaces the whole contents.
    pub fn upload(&mut self, data: &[T]) -> Result<()> {
        if data.len() != self.len() {
            return Err(Error::SizeMismatch {
                expected: self.len(),
                got: data.len(),
                shape: self.shape.to_vec(),
            });
        }
        self.backend.write(&*self.buffer, &to_words(data))
    }

    /// Copies the whole contents back.
    pub fn download(&self) -> Result<Vec<T>> {
        Ok(from_words(&self.backend.read(&*self.buffer)?))
    }

    /// Sets every element to `value`.
    pub fn fill(&mut self, value: T) -> Result<()> {
        let data = vec![value; self.len()];
        self.upload(&data)
    }

    /// The launch argument for this field (used by generated kernel code).
    #[doc(hidden)]
    pub fn arg(&self) -> FieldArg<'_> {
        FieldArg {
            buffer: &*self.buffer,
            shape: &self.shape,
        }
    }
}
