//! Fields: typed, shaped arrays that live on a backend.

use std::marker::PhantomData;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, Weak};

use crate::backend::{BackendRef, Buffer, FieldArg, TreeArg};
use crate::error::{Error, Result};
use crate::layout::{Layout, Structure};
use crate::sparse::Sparse;
use crate::types::{from_words, to_words, Elem};

/// A field of `D` dimensions (0 to 3) holding elements of type `T`: dense, or placed on a
/// sparse [`Tree`].
pub struct Field<T: Elem, const D: usize = 1> {
    backend: BackendRef,
    buffer: Arc<dyn Buffer>,
    shape: [u32; D],
    tree: Option<Arc<Tree<D>>>,
    _t: PhantomData<T>,
}

/// A layout tree allocated on a backend; fields placed on it share its activity.
pub struct Tree<const D: usize> {
    backend: BackendRef,
    layout: Layout<D>,
    plan: Structure,
    /// The structure words with everything inactive (what `deactivate_all` writes).
    empty: Vec<u32>,
    structure: Arc<dyn Buffer>,
    fields: Mutex<Vec<(Weak<dyn Buffer>, usize)>>,
}

/// Memory of a field or tree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// Bytes allocated.
    pub reserved: u64,
    /// Bytes of blocks in use (equal to `reserved` for dense storage).
    pub in_use: u64,
}

impl<const D: usize> Tree<D> {
    /// Allocates the structure of `layout` (everything inactive).
    pub fn new(backend: &BackendRef, layout: Layout<D>) -> Result<Arc<Self>> {
        let plan = layout.structure()?;
        let structure = backend.alloc(plan.words as usize)?;
        let empty = plan.initial_words();
        backend.write(&*structure, &empty)?;
        Ok(Arc::new(Tree {
            backend: backend.clone(),
            layout,
            plan,
            empty,
            structure,
            fields: Mutex::new(Vec::new()),
        }))
    }

    pub fn layout(&self) -> &Layout<D> {
        &self.layout
    }

    pub fn shape(&self) -> [u32; D] {
        self.layout.shape()
    }

    /// Deactivates every cell and clears the data of every field on the tree.
    pub fn deactivate_all(&self) -> Result<()> {
        self.backend.write(&*self.structure, &self.empty)?;
        for (buffer, _) in self.fields() {
            self.backend.fill_zero(&*buffer)?;
        }
        Ok(())
    }

    /// A host copy of the structure words, for the host-side algorithms of
    /// [`crate::sparse`] (memory accounting, dense downloads).
    fn structure_words(&self) -> Result<Vec<AtomicU32>> {
        Ok(self
            .backend
            .read(&*self.structure)?
            .into_iter()
            .map(AtomicU32::new)
            .collect())
    }

    /// The fraction of the leaf block pool in use (0 to 1; 0 for an all-dense tree).
    pub fn occupancy(&self) -> Result<f64> {
        if self.plan.deactivation.is_none() {
            return Ok(0.0);
        }
        let words = self.structure_words()?;
        let sparse = Sparse::new(&self.plan, &words);
        Ok(sparse.elements_in_use() as f64 / self.plan.elements.max(1) as f64)
    }

    /// The structure's memory and, for every field placed on the tree, the elements' memory.
    pub fn memory(&self) -> Result<Memory> {
        let words = self.structure_words()?;
        let sparse = Sparse::new(&self.plan, &words);
        let in_use_elements = sparse.elements_in_use();
        let mut m = Memory {
            reserved: self.plan.bytes(),
            in_use: sparse.table_words_in_use() * 4,
        };
        for (buffer, per_element) in self.fields() {
            m.reserved += buffer.words() as u64 * 4;
            m.in_use += in_use_elements * per_element as u64 * 4;
        }
        Ok(m)
    }
}

impl<const D: usize> TreeArg for Tree<D> {
    fn plan(&self) -> &Structure {
        &self.plan
    }
    fn structure(&self) -> &dyn Buffer {
        &*self.structure
    }
    fn fields(&self) -> Vec<(Arc<dyn Buffer>, usize)> {
        let mut fields = self.fields.lock().unwrap_or_else(|e| e.into_inner());
        fields.retain(|(w, _)| w.strong_count() > 0);
        fields
            .iter()
            .filter_map(|(w, n)| Some((w.upgrade()?, *n)))
            .collect()
    }
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
            tree: None,
            _t: PhantomData,
        })
    }

    /// A field placed on a layout tree: it exists where the tree's cells are active.
    pub fn place(tree: &Arc<Tree<D>>) -> Result<Self> {
        let buffer = tree.backend.alloc(tree.plan.elements as usize * T::WORDS)?;
        tree.fields
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((Arc::downgrade(&buffer), T::WORDS));
        Ok(Field {
            backend: tree.backend.clone(),
            buffer,
            shape: tree.shape(),
            tree: Some(tree.clone()),
            _t: PhantomData,
        })
    }

    /// The tree this field is placed on, if any.
    pub fn tree(&self) -> Option<&Arc<Tree<D>>> {
        self.tree.as_ref()
    }

    /// Memory this field holds (the structure of its tree is counted by the tree).
    pub fn memory(&self) -> Result<Memory> {
        let reserved = self.buffer.words() as u64 * 4;
        let in_use = match &self.tree {
            None => reserved,
            Some(t) => {
                let words = t.structure_words()?;
                Sparse::new(&t.plan, &words).elements_in_use() * T::WORDS as u64 * 4
            }
        };
        Ok(Memory { reserved, in_use })
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

    /// Bytes of device (or host) memory this field's elements take.
    pub fn bytes(&self) -> usize {
        self.buffer.words() * 4
    }

    /// Replaces the whole contents (dense fields only: sparse ones are written by kernels).
    pub fn upload(&mut self, data: &[T]) -> Result<()> {
        if self.tree.is_some() {
            return Err(Error::Unsupported {
                backend: "any",
                what: "uploading into a sparse field; write it with a kernel".into(),
            });
        }
        if data.len() != self.len() {
            return Err(Error::SizeMismatch {
                expected: self.len(),
                got: data.len(),
                shape: self.shape.to_vec(),
            });
        }
        self.backend.write(&*self.buffer, &to_words(data))
    }

    /// Copies the whole contents back, as a dense array (inactive cells of a sparse field
    /// read as zero).
    pub fn download(&self) -> Result<Vec<T>> {
        let data = self.backend.read(&*self.buffer)?;
        let Some(tree) = &self.tree else {
            return Ok(from_words(&data));
        };
        if self.len() > 1 << 28 {
            return Err(Error::Unsupported {
                backend: "any",
                what: format!(
                    "downloading a sparse field of {} cells as a dense array",
                    self.len()
                ),
            });
        }
        let words = tree.structure_words()?;
        let sparse = Sparse::new(&tree.plan, &words);
        let mut out = vec![T::zero(); self.len()];
        for e in 0..tree.plan.elements {
            if let Some(c) = sparse.element_coords(e) {
                let mut lin = 0usize;
                for (a, s) in self.shape.iter().enumerate() {
                    lin = lin * *s as usize + c[a] as usize;
                }
                let w = &data[e as usize * T::WORDS..(e as usize + 1) * T::WORDS];
                out[lin] = T::read_words(w);
            }
        }
        Ok(out)
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
            tree: self.tree.as_deref().map(|t| t as &dyn TreeArg),
        }
    }
}
