//! Test helpers: a tiny IR builder, kernel descriptors and backend setup.
#![allow(dead_code)]

use std::sync::Arc;

use mpm_core::backend::{Buffer, FieldArg, LaunchArgs, LoopRange, TreeArg};
use mpm_core::host::HostArgs;
use mpm_core::ir::*;
use mpm_core::layout::Structure;
use mpm_core::types::{Scalar, Ty};
use mpm_core::{Backend, KernelDesc, Result};
use mpm_vulkan::{VulkanBackend, VulkanOptions};

pub fn noop(_: &HostArgs<'_>) {}

/// A layout tree made by hand: a structure buffer and one single-word field on it.
pub struct TestTree {
    pub plan: Structure,
    pub structure: Arc<dyn Buffer>,
    pub grid: Arc<dyn Buffer>,
}

impl TreeArg for TestTree {
    fn plan(&self) -> &Structure {
        &self.plan
    }
    fn structure(&self) -> &dyn Buffer {
        &*self.structure
    }
    fn fields(&self) -> Vec<(Arc<dyn Buffer>, usize)> {
        vec![(self.grid.clone(), 1)]
    }
}

/// A `KernelDesc` for a hand-built trace function.
#[macro_export]
macro_rules! desc {
    ($name:literal, [$($f:literal),*], $trace:path) => {
        mpm_core::KernelDesc {
            name: $name,
            module: "vk_tests",
            field_names: &[$($f),*],
            loop_names: &[],
            trace: $trace,
            cpu: common::noop,
        }
    };
}

/// A backend with validation on, or None (with a printed reason) when no Vulkan device exists.
pub fn backend_or_skip() -> Option<VulkanBackend> {
    backend_with(true)
}

pub fn backend_with(float_atomics: bool) -> Option<VulkanBackend> {
    let opts = VulkanOptions {
        device: std::env::var("MPM_VK_DEVICE").ok(),
        validation: true,
        float_atomics,
        aggregate_adds: false,
        batches: true,
    };
    mpm_vulkan::backend_for_tests(opts, "this test")
        .unwrap_or_else(|e| panic!("Vulkan backend creation failed: {e}"))
}

/// Validates every compiled shader with `spirv-val` (when installed) and checks that the
/// validation layer reported nothing.
pub fn final_checks(be: &VulkanBackend) {
    let shaders = be.compiled_shaders();
    if std::env::var_os("MPM_DUMP_GLSL").is_some() {
        for s in &shaders {
            eprintln!("// ===== {} loop {}\n{}", s.kernel, s.loop_index, s.glsl);
        }
    }
    if let Err(e) = mpm_vulkan::spirv_val(&shaders) {
        panic!("{e}");
    }
    if be.validation_enabled() {
        let msgs = VulkanBackend::validation_messages();
        assert!(msgs.is_empty(), "validation messages: {msgs:#?}");
    } else {
        eprintln!("note: validation layer not available; validation messages not checked");
    }
}

pub fn buf(be: &VulkanBackend, words: &[u32]) -> Arc<dyn Buffer> {
    let b = be.alloc(words.len()).unwrap();
    be.write(&*b, 0, words).unwrap();
    b
}

pub fn fbuf(be: &VulkanBackend, v: &[f32]) -> Arc<dyn Buffer> {
    buf(be, &v.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
}

pub fn ibuf(be: &VulkanBackend, v: &[i32]) -> Arc<dyn Buffer> {
    buf(be, &v.iter().map(|x| *x as u32).collect::<Vec<_>>())
}

pub fn read_f(be: &VulkanBackend, b: &Arc<dyn Buffer>) -> Vec<f32> {
    be.read(&**b)
        .unwrap()
        .into_iter()
        .map(f32::from_bits)
        .collect()
}

pub fn read_i(be: &VulkanBackend, b: &Arc<dyn Buffer>) -> Vec<i32> {
    be.read(&**b)
        .unwrap()
        .into_iter()
        .map(|w| w as i32)
        .collect()
}

pub fn run(
    be: &VulkanBackend,
    desc: &KernelDesc,
    fields: &[(&Arc<dyn Buffer>, &[u32])],
    scalars: &[u32],
    ranges: &[(i64, u64)],
) -> Result<()> {
    let ranges: Vec<LoopRange> = ranges
        .iter()
        .map(|&(start, count)| LoopRange { start, count })
        .collect();
    let args = LaunchArgs {
        fields: fields
            .iter()
            .map(|(b, s)| FieldArg {
                buffer: Arc::clone(b),
                shape: s,
                tree: None,
            })
            .collect(),
        trees: Vec::new(),
        scalars,
        ranges: &ranges,
        loops: 0..ranges.len(),
    };
    be.launch(desc, &args).outcome
}

/// A small builder of kernel IR.
#[derive(Default)]
pub struct Kb {
    pub k: Kernel,
}

impl Kb {
    pub fn new(name: &str) -> Kb {
        Kb {
            k: Kernel {
                name: name.into(),
                ..Default::default()
            },
        }
    }
    pub fn field(&mut self, name: &str, elem: Ty, dims: u32) -> u32 {
        self.k.fields.push(FieldParam {
            name: name.into(),
            elem,
            dims,
            writable: true,
        });
        self.k.fields.len() as u32 - 1
    }
    pub fn scalar(&mut self, ty: Ty) -> ExprId {
        self.k.scalars.push(ty.clone());
        let n = self.k.scalars.len() as u32 - 1;
        self.e(ExprKind::Scalar(n), ty)
    }
    pub fn var(&mut self, name: &str, ty: Ty) -> VarId {
        self.k.vars.push(Var {
            ty,
            name: name.into(),
        });
        self.k.vars.len() as u32 - 1
    }
    pub fn e(&mut self, kind: ExprKind, ty: Ty) -> ExprId {
        self.k.exprs.push(Expr { kind, ty });
        self.k.exprs.len() as u32 - 1
    }
    pub fn ty(&self, e: ExprId) -> Ty {
        self.k.exprs[e as usize].ty.clone()
    }
    pub fn f(&mut self, v: f32) -> ExprId {
        self.e(ExprKind::Lit(v.to_bits()), Ty::F32)
    }
    pub fn i(&mut self, v: i32) -> ExprId {
        self.e(ExprKind::Lit(v as u32), Ty::I32)
    }
    pub fn u(&mut self, v: u32) -> ExprId {
        self.e(ExprKind::Lit(v), Ty::U32)
    }
    pub fn b(&mut self, v: bool) -> ExprId {
        self.e(ExprKind::Lit(v as u32), Ty::BOOL)
    }
    pub fn v(&mut self, var: VarId) -> ExprId {
        let t = self.k.vars[var as usize].ty.clone();
        self.e(ExprKind::Var(var), t)
    }
    pub fn bin(&mut self, op: BinOp, a: ExprId, b: ExprId) -> ExprId {
        let (ta, tb) = (self.ty(a), self.ty(b));
        let t = match op {
            BinOp::Eq
            | BinOp::Ne
            | BinOp::Lt
            | BinOp::Le
            | BinOp::Gt
            | BinOp::Ge
            | BinOp::And
            | BinOp::Or => Ty::BOOL,
            _ => match (&ta, &tb) {
                (Ty::Matrix(_), Ty::Vector(..)) => tb.clone(),
                (Ty::Scalar(_), _) => tb.clone(),
                _ => ta.clone(),
            },
        };
        self.e(ExprKind::Binary(op, a, b), t)
    }
    pub fn un(&mut self, op: UnOp, a: ExprId) -> ExprId {
        let t = self.ty(a);
        self.e(ExprKind::Unary(op, a), t)
    }
    pub fn cast(&mut self, a: ExprId, ty: Ty) -> ExprId {
        self.e(ExprKind::Cast(a), ty)
    }
    pub fn builtin(&mut self, b: Builtin, args: &[ExprId], ty: Ty) -> ExprId {
        self.e(ExprKind::Builtin(b, args.to_vec()), ty)
    }
    pub fn load(&mut self, field: u32, index: ExprId) -> ExprId {
        let t = self.k.fields[field as usize].elem.clone();
        self.e(ExprKind::Load { field, index }, t)
    }
    pub fn member(&mut self, a: ExprId, k: u32, ty: Ty) -> ExprId {
        self.e(ExprKind::Member(a, k), ty)
    }
    pub fn index(&mut self, a: ExprId, i: ExprId, ty: Ty) -> ExprId {
        self.e(ExprKind::Index(a, i), ty)
    }
    pub fn construct(&mut self, parts: &[ExprId], ty: Ty) -> ExprId {
        self.e(ExprKind::Construct(parts.to_vec()), ty)
    }
    /// `for v in field.indices()`; returns the loop variable.
    pub fn par_indices(&mut self, field: u32, ty: Ty) -> VarId {
        let v = self.var("i", ty);
        self.k.loops.push(ParLoop {
            domain: LoopDomain::Indices(field),
            var: v,
            body: vec![],
        });
        v
    }
    /// `for v in a..b` at the top level; returns the loop variable.
    pub fn par_range(&mut self, ty: Ty) -> VarId {
        let v = self.var("i", ty);
        self.k.loops.push(ParLoop {
            domain: LoopDomain::Range,
            var: v,
            body: vec![],
        });
        v
    }
    /// Appends to the body of the last loop.
    pub fn push(&mut self, s: Stmt) {
        self.k.loops.last_mut().expect("a loop").body.push(s);
    }
    pub fn finish(self) -> Result<Kernel> {
        Ok(self.k)
    }
}

pub fn vec_ty(s: Scalar, n: u8) -> Ty {
    Ty::Vector(s, n)
}
