//! GLSL for sparse layout trees: the walks of `mpm_core::sparse` over a tree's structure
//! buffer, specialised for its plan, and the maintenance shaders run after each launch.
//!
//! Activation locks the pointer slot (`atomicCompSwap` to `LOCKED`), then takes a block and
//! stores it, as on the CPU. The plan's offsets are printed into the source as literals, so
//! the shader cache key includes the plan.

use std::fmt::Write as _;

use mpm_core::layout::{LevelKind, LevelPlan, Structure, STATUS};

/// `0xffffffffu`: an empty pointer slot.
const EMPTY: &str = "0xffffffffu";
/// `0xfffffffeu`: a slot being installed ([`mpm_core::layout::LOCKED`]).
const LOCKED: &str = "0xfffffffeu";

/// The cell index of coordinates `c` (an `uvec3` expression) inside `block` at one level.
fn cell_expr(p: &LevelPlan, block: &str, c: &str) -> String {
    let mut local = String::from("0u");
    for a in 0..3 {
        let s = p.level.shape[a];
        if s == 1 {
            continue;
        }
        let st = p.stride[a];
        let ax = ["x", "y", "z"][a];
        let part = if st == 1 {
            format!("({c}.{ax} % {s}u)")
        } else {
            format!("(({c}.{ax} / {st}u) % {s}u)")
        };
        local = if local == "0u" {
            part
        } else {
            format!("({local} * {s}u + {part})")
        };
    }
    format!("({block} * {}u + {local})", p.level.cells())
}

fn bit_test(tree: &str, table: u32, cell: &str) -> String {
    format!("(({tree}.w[{table}u + {cell} / 32u] & (1u << ({cell} % 32u))) != 0u)")
}

/// The structure buffer declaration of tree `t` at `binding`.
pub fn tree_declaration(t: usize, binding: u32, plan: &Structure) -> String {
    format!(
        "// tree {t}: {} levels {:?}, {} elements, {} words\n\
         layout(set = 0, binding = {binding}, std430) coherent buffer Tree{t} {{ uint w[]; }} t{t};\n",
        plan.levels.len(),
        plan.levels
            .iter()
            .map(|l| (l.level.kind, l.level.shape, l.capacity))
            .collect::<Vec<_>>(),
        plan.elements,
        plan.words
    )
}

/// Whether the tree's helpers use subgroup operations (given that the device has them).
pub fn uses_subgroups(plan: &Structure) -> bool {
    plan.levels.iter().any(|p| p.pool.is_some())
}

/// Helper functions of tree `t`: `t{t}_locate(uvec3 c, bool act, out uint e)`,
/// `t{t}_deactivate(uvec3 c)` and `t{t}_coords(uint e, out uvec3 c)`.
///
/// With `subgroups`, the invocations of a subgroup that find the same pointer slot empty
/// elect one of them to allocate the block (a bounded loop over the distinct slots): on a GPU
/// running a subgroup in lock-step, the others would otherwise spin on the slot's lock.
///
/// In a `frozen` tree (`Tree::freeze`) `locate` activates nothing: it fails on an inactive
/// cell whether `act` is set or not, and the tree has no allocation code.
pub fn tree_helpers(t: usize, plan: &Structure, subgroups: bool, frozen: bool) -> String {
    let tw = format!("t{t}");
    let mut out = String::new();
    let last = plan.levels.len() - 1;
    // Allocation below each pointer level.
    for (k, p) in plan.levels.iter().enumerate() {
        let Some(pool) = &p.pool else { continue };
        if frozen {
            continue;
        }
        // The slot is locked before a block is taken (see `mpm_core::sparse`). The loop is
        // safe on GPUs that run a subgroup in lock-step: the invocation that locks the slot
        // stores the block and returns within the same iteration, before any waiting one
        // goes round again.
        writeln!(
            out,
            "bool {tw}_alloc{k}_one(uint cell, out uint child) {{\n    \
             for (;;) {{\n        \
             uint prev = atomicCompSwap({tw}.w[{table}u + cell], {EMPTY}, {LOCKED});\n        \
             if (prev == {EMPTY}) {{\n            \
             uint taken = atomicAdd({tw}.w[{ft}u], 1u);\n            \
             if (taken < {tw}.w[{fl}u]) {{\n                child = {tw}.w[{free}u + taken];\n            }} else {{\n                \
             child = atomicAdd({tw}.w[{cnt}u], 1u);\n                \
             if (child >= {cap}u) {{\n                    \
             atomicExchange({tw}.w[{table}u + cell], {EMPTY});\n                    \
             atomicCompSwap({tw}.w[{STATUS}u], 0u, {lvl}u);\n                    \
             child = 0u;\n                    return false;\n                }}\n            }}\n            \
             {tw}.w[{owner}u + child] = {table}u + cell;\n            \
             atomicExchange({tw}.w[{table}u + cell], child);\n            \
             return true;\n        }}\n        \
             if (prev != {LOCKED}) {{\n            child = prev;\n            return true;\n        }}\n    }}\n}}",
            ft = pool.free_taken,
            fl = pool.free_len,
            free = pool.free,
            cnt = pool.counter,
            cap = pool.capacity,
            lvl = k + 1,
            table = p.table,
            owner = pool.owner,
        )
        .unwrap();
        if subgroups {
            writeln!(
                out,
                "bool {tw}_alloc{k}(uint cell, out uint child) {{\n    \
                 for (;;) {{\n        \
                 if (cell == subgroupBroadcastFirst(cell)) {{\n            \
                 if (subgroupElect()) return {tw}_alloc{k}_one(cell, child);\n            \
                 // The elected invocation has installed a block (or found one), unless the\n            \
                 // pool ran out or it is still at it: then allocate (or wait) as usual.\n            \
                 child = atomicOr({tw}.w[{table}u + cell], 0u);\n            \
                 if (child < {LOCKED}) return true;\n            \
                 return {tw}_alloc{k}_one(cell, child);\n        }}\n    }}\n}}",
                table = p.table
            )
            .unwrap();
        } else {
            writeln!(
                out,
                "bool {tw}_alloc{k}(uint cell, out uint child) {{\n    return {tw}_alloc{k}_one(cell, child);\n}}"
            )
            .unwrap();
        }
    }
    // locate
    writeln!(
        out,
        "bool {tw}_locate(uvec3 c, bool act, out uint e) {{\n    uint block = 0u;\n    uint cell;\n    e = 0u;"
    )
    .unwrap();
    for (k, p) in plan.levels.iter().enumerate() {
        writeln!(out, "    cell = {};", cell_expr(p, "block", "c")).unwrap();
        match p.level.kind {
            LevelKind::Dense => {}
            LevelKind::Bitmasked if frozen => {
                let bit = bit_test(&tw, p.table, "cell");
                writeln!(out, "    if (!{bit}) return false;").unwrap();
            }
            LevelKind::Bitmasked => {
                writeln!(
                    out,
                    "    if (!{}) {{\n        if (!act) return false;\n        \
                     atomicOr({tw}.w[{}u + cell / 32u], 1u << (cell % 32u));\n    }}",
                    bit_test(&tw, p.table, "cell"),
                    p.table
                )
                .unwrap();
            }
            LevelKind::Pointer if frozen => {
                writeln!(
                    out,
                    "    block = {tw}.w[{}u + cell];\n    if (block == {EMPTY}) return false;",
                    p.table
                )
                .unwrap();
                continue;
            }
            LevelKind::Pointer => {
                writeln!(
                    out,
                    "    {{\n        uint child = {tw}.w[{}u + cell];\n        if (child >= {LOCKED}) {{\n            \
                     if (!act) return false;\n            if (!{tw}_alloc{k}(cell, child)) return false;\n        }}\n        \
                     block = child;\n    }}",
                    p.table
                )
                .unwrap();
                continue;
            }
        }
        if k == last {
            writeln!(out, "    e = cell;\n    return true;").unwrap();
        } else {
            writeln!(out, "    block = cell;").unwrap();
        }
    }
    out.push_str("}\n");
    // deactivate: queue the deepest sparse cell.
    writeln!(out, "void {tw}_deactivate(uvec3 c) {{").unwrap();
    if let Some(d) = &plan.deactivation {
        out.push_str("    uint block = 0u;\n    uint cell;\n");
        for (k, p) in plan.levels.iter().enumerate() {
            writeln!(out, "    cell = {};", cell_expr(p, "block", "c")).unwrap();
            if k as u32 == d.level {
                let active = match p.level.kind {
                    LevelKind::Bitmasked => bit_test(&tw, p.table, "cell"),
                    _ => format!("({tw}.w[{}u + cell] < {LOCKED})", p.table),
                };
                writeln!(
                    out,
                    "    uint mark = 1u << (cell % 32u);\n    \
                     if ({active} && (atomicOr({tw}.w[{q}u + cell / 32u], mark) & mark) == 0u) {{\n        \
                     uint r = atomicAdd({tw}.w[{len}u], 1u);\n        \
                     if (r < {cap}u) {tw}.w[{queue}u + r] = cell;\n    }}\n    return;",
                    q = d.queued,
                    len = d.len,
                    cap = d.capacity,
                    queue = d.queue,
                )
                .unwrap();
                break;
            }
            match p.level.kind {
                LevelKind::Dense => out.push_str("    block = cell;\n"),
                LevelKind::Bitmasked => writeln!(
                    out,
                    "    if (!{}) return;\n    block = cell;",
                    bit_test(&tw, p.table, "cell")
                )
                .unwrap(),
                LevelKind::Pointer => writeln!(
                    out,
                    "    block = {tw}.w[{}u + cell];\n    if (block >= {LOCKED}) return;",
                    p.table
                )
                .unwrap(),
            }
        }
    }
    out.push_str("}\n");
    // coords: leaf element -> coordinates, walking up through the owners.
    writeln!(
        out,
        "bool {tw}_coords(uint e, out uvec3 c) {{\n    c = uvec3(0u);\n    uint cell = e;\n    uint block;\n    uint local;"
    )
    .unwrap();
    walk_up(&mut out, &tw, plan, last);
    out.push_str("}\n");
    out.push_str(&leaf_origin(t, plan));
    out
}

/// `t{t}_leaf_origin(uint b, out uvec3 c)`: whether leaf block `b` (a block of the last
/// level) is live, walking up through the owners and bits exactly as `t{t}_coords` does for
/// its first cell but without the cell's own bit, and the coordinates of its first element.
fn leaf_origin(t: usize, plan: &Structure) -> String {
    let tw = format!("t{t}");
    let mut out = String::new();
    let last = plan.levels.len() - 1;
    writeln!(
        out,
        "bool {tw}_leaf_origin(uint b, out uvec3 c) {{\n    c = uvec3(0u);\n    uint cell;\n    uint block = b;\n    uint local;"
    )
    .unwrap();
    if last == 0 {
        out.push_str("    return block == 0u;\n}\n");
        return out;
    }
    parent_cell(&mut out, &tw, plan, last);
    walk_up(&mut out, &tw, plan, last - 1);
    out.push_str("}\n");
    out
}

/// Sets `cell` to the cell of level `k - 1` that holds `block` of level `k` (returning false
/// from the enclosing function when the block is free).
fn parent_cell(out: &mut String, tw: &str, plan: &Structure, k: usize) {
    let parent = &plan.levels[k - 1];
    match &parent.pool {
        Some(pool) => writeln!(
            out,
            "    {{\n        uint slot = {tw}.w[{}u + block];\n        if (slot == {EMPTY}) return false;\n        \
             cell = slot - {}u;\n    }}",
            pool.owner, parent.table
        )
        .unwrap(),
        None => out.push_str("    cell = block;\n"),
    }
}

/// Walks from `cell` (a cell index of level `top`) up to the root, adding each level's
/// offsets to `c`; returns from the enclosing function.
fn walk_up(out: &mut String, tw: &str, plan: &Structure, top: usize) {
    for k in (0..=top).rev() {
        let p = &plan.levels[k];
        if p.level.kind == LevelKind::Bitmasked {
            writeln!(
                out,
                "    if (!{}) return false;",
                bit_test(tw, p.table, "cell")
            )
            .unwrap();
        }
        let cells = p.level.cells();
        writeln!(
            out,
            "    block = cell / {cells}u;\n    local = cell % {cells}u;"
        )
        .unwrap();
        local_offsets(out, p, "local");
        if k == 0 {
            out.push_str("    return block == 0u;\n");
            break;
        }
        parent_cell(out, tw, plan, k);
    }
}

/// Adds to `c` the offsets of cell `local` (a variable, consumed) inside a block of `p`.
fn local_offsets(out: &mut String, p: &LevelPlan, local: &str) {
    for a in (0..3).rev() {
        let s = p.level.shape[a];
        if s == 1 {
            continue;
        }
        let ax = ["x", "y", "z"][a];
        writeln!(
            out,
            "    c.{ax} += ({local} % {s}u) * {}u;\n    {local} /= {s}u;",
            p.stride[a]
        )
        .unwrap();
    }
}

/// Whether a tree needs maintenance after a launch (it has pools or a deactivation queue).
pub fn needs_maintenance(plan: &Structure) -> bool {
    plan.deactivation.is_some() || plan.levels.iter().any(|p| p.pool.is_some())
}

/// The three maintenance shaders of a tree whose fields have `per_element` words each
/// (binding 0 is the structure, binding 1 + j field j, and with a deactivation queue binding
/// 1 + fields the indirect dispatch of pass 1). Pass 0 (one invocation) writes that dispatch
/// from the queue's length, so that pass 1 runs one invocation per queued cell rather than
/// per cell the queue could hold; pass 1 applies the queue; pass 2 (one invocation) resets
/// the queue and rebuilds each pool's free list. `None` for a pass with nothing to do.
pub fn maintenance_shaders(
    plan: &Structure,
    per_element: &[usize],
    local_size: u32,
    max_groups_x: u32,
) -> [Option<String>; 3] {
    let tree = tree_declaration(0, 0, plan)
        .replace("Tree0", "Tree")
        .replace("t0;", "t;");
    let mut head = format!("#version 450\nlayout(local_size_x = {local_size}) in;\n");
    head.push_str(&tree);
    for (j, n) in per_element.iter().enumerate() {
        writeln!(
            head,
            "// field {j}: {n} words per element\n\
             layout(set = 0, binding = {}, std430) buffer Field{j} {{ uint d[]; }} f{j};",
            1 + j
        )
        .unwrap();
    }
    let id = format!(
        "    uint mpm_id = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * {local_size}u + gl_LocalInvocationID.x;\n"
    );
    let dispatch = plan.deactivation.as_ref().map(|d| {
        let mut s = format!("#version 450\nlayout(local_size_x = 1) in;\n{tree}");
        writeln!(
            s,
            "layout(set = 0, binding = {binding}, std430) writeonly buffer Dispatch {{ uint w[3]; }} g;\n\
             void main() {{\n    \
             uint n = min(t.w[{len}u], {cap}u);\n    \
             uint groups = n / {local_size}u + (n % {local_size}u != 0u ? 1u : 0u);\n    \
             uint gx = min(groups, {max_groups_x}u);\n    \
             g.w[0] = gx;\n    g.w[1] = gx == 0u ? 1u : (groups + gx - 1u) / gx;\n    g.w[2] = 1u;\n}}",
            binding = 1 + per_element.len(),
            len = d.len,
            cap = d.capacity,
        )
        .unwrap();
        s
    });
    let apply = plan.deactivation.as_ref().map(|d| {
        let k = d.level as usize;
        let p = &plan.levels[k];
        let mut below = Vec::new();
        let mut acc = 1u64;
        for l in &plan.levels[k + 1..] {
            acc *= l.level.cells() as u64;
            below.push(acc);
        }
        let unit = below.last().copied().unwrap_or(1);
        let mut s = head.clone();
        s.push_str("void main() {\n");
        s.push_str(&id);
        writeln!(
            s,
            "    uint n = min(t.w[{len}u], {cap}u);\n    if (mpm_id >= n) return;\n    \
             uint cell = t.w[{queue}u + mpm_id];\n    \
             atomicAnd(t.w[{queued}u + cell / 32u], ~(1u << (cell % 32u)));\n    uint first;",
            len = d.len,
            cap = d.capacity,
            queue = d.queue,
            queued = d.queued
        )
        .unwrap();
        match (&p.level.kind, &p.pool) {
            (LevelKind::Pointer, Some(pool)) => writeln!(
                s,
                "    uint block = atomicExchange(t.w[{table}u + cell], {EMPTY});\n    \
                 if (block == {EMPTY}) return;\n    t.w[{owner}u + block] = {EMPTY};\n    \
                 uint back = atomicAdd(t.w[{rl}u], 1u);\n    t.w[{ret}u + back] = block;\n    first = block;",
                table = p.table,
                owner = pool.owner,
                rl = pool.returned_len,
                ret = pool.returned
            )
            .unwrap(),
            _ => writeln!(
                s,
                "    atomicAnd(t.w[{}u + cell / 32u], ~(1u << (cell % 32u)));\n    first = cell;",
                p.table
            )
            .unwrap(),
        }
        for (j, l) in plan.levels[k + 1..].iter().enumerate() {
            if l.level.kind == LevelKind::Bitmasked {
                writeln!(
                    s,
                    "    for (uint b = first * {span}u; b < (first + 1u) * {span}u; b++) {{\n        \
                     atomicAnd(t.w[{table}u + b / 32u], ~(1u << (b % 32u)));\n    }}",
                    span = below[j],
                    table = l.table
                )
                .unwrap();
            }
        }
        for (j, n) in per_element.iter().enumerate() {
            let words = unit * *n as u64;
            writeln!(
                s,
                "    for (uint i = first * {words}u; i < (first + 1u) * {words}u; i++) {{\n        f{j}.d[i] = 0u;\n    }}"
            )
            .unwrap();
        }
        s.push_str("}\n");
        s
    });
    let pools: Vec<_> = plan.levels.iter().filter_map(|p| p.pool.as_ref()).collect();
    let recycle = (plan.deactivation.is_some() || !pools.is_empty()).then(|| {
        let mut s = head.clone();
        s.push_str("void main() {\n");
        s.push_str(&id);
        s.push_str("    if (mpm_id != 0u) return;\n");
        if let Some(d) = &plan.deactivation {
            writeln!(s, "    t.w[{}u] = 0u;", d.len).unwrap();
        }
        for pool in pools {
            writeln!(
                s,
                "    {{\n        uint len = t.w[{fl}u];\n        uint taken = min(t.w[{ft}u], len);\n        uint o = 0u;\n        \
                 for (uint i = taken; i < len; i++) {{\n            t.w[{free}u + o] = t.w[{free}u + i];\n            o++;\n        }}\n        \
                 uint ret = t.w[{rl}u];\n        \
                 for (uint i = 0u; i < ret; i++) {{\n            t.w[{free}u + o] = t.w[{retb}u + i];\n            o++;\n        }}\n        \
                 t.w[{fl}u] = o;\n        t.w[{ft}u] = 0u;\n        t.w[{rl}u] = 0u;\n        \
                 t.w[{cnt}u] = min(t.w[{cnt}u], {cap}u);\n    }}",
                fl = pool.free_len,
                ft = pool.free_taken,
                free = pool.free,
                rl = pool.returned_len,
                retb = pool.returned,
                cnt = pool.counter,
                cap = pool.capacity
            )
            .unwrap();
        }
        s.push_str("}\n");
        s
    });
    [dispatch, apply, recycle]
}

/// Whether a tree has a pointer or bitmasked level, so that `active()` loops over its fields
/// run over a compacted list of live leaf blocks.
pub fn is_sparse(plan: &Structure) -> bool {
    plan.levels.iter().any(|p| p.level.kind != LevelKind::Dense)
}

/// The active-block buffer of a tree: words 0..3 are the `VkDispatchIndirectCommand` of the
/// `active()` loop, then the number of live leaf blocks, the compaction's counter (zero
/// between launches) and the list of live leaf blocks.
pub const ACTIVE_COUNT: u32 = 3;
/// Word of the active-block buffer counting the blocks appended so far.
pub const ACTIVE_COUNTER: u32 = 4;
/// First word of the list of live leaf blocks.
pub const ACTIVE_LIST: u32 = 5;

/// Leaf blocks of a tree: the blocks of its last level.
pub fn leaf_blocks(plan: &Structure) -> u32 {
    plan.levels.last().map_or(1, |p| p.capacity)
}

/// Words of a tree's active-block buffer.
pub fn active_words(plan: &Structure) -> usize {
    ACTIVE_LIST as usize + leaf_blocks(plan) as usize
}

/// The active-block buffer declaration of tree `t` at `binding`.
pub fn active_declaration(t: usize, binding: u32) -> String {
    format!("layout(set = 0, binding = {binding}, std430) buffer Active{t} {{ uint w[]; }} a{t};\n")
}

/// The start of an `active()` loop over a field of sparse tree `t`: from the invocation id
/// `mpm_id` (dispatched indirectly, one invocation per cell of each live leaf block), returns
/// early past the end or on a cell whose bit is clear, else sets `uvec3 mpm_c`.
pub fn active_loop_prologue(t: usize, plan: &Structure) -> String {
    let leaf = plan.levels.last().expect("a layout has levels");
    let cells = leaf.level.cells();
    let mut out = format!(
        "    if (mpm_id >= a{t}.w[{ACTIVE_COUNT}u] * {cells}u) {{\n        return;\n    }}\n    \
         uint mpm_b = a{t}.w[{ACTIVE_LIST}u + mpm_id / {cells}u];\n    \
         uint mpm_local = mpm_id % {cells}u;\n"
    );
    if leaf.level.kind == LevelKind::Bitmasked {
        let e = format!("(mpm_b * {cells}u + mpm_local)");
        writeln!(
            out,
            "    if (!{}) {{\n        return;\n    }}",
            bit_test(&format!("t{t}"), leaf.table, &e)
        )
        .unwrap();
    }
    writeln!(
        out,
        "    uvec3 mpm_c;\n    if (!t{t}_leaf_origin(mpm_b, mpm_c)) {{\n        return;\n    }}\n    {{\n        uvec3 c = mpm_c;"
    )
    .unwrap();
    let mut offsets = String::new();
    local_offsets(&mut offsets, leaf, "mpm_local");
    for line in offsets.lines() {
        writeln!(out, "    {line}").unwrap();
    }
    out.push_str("        mpm_c = c;\n    }\n");
    out
}

/// The two passes that build tree `plan`'s active-block list before an `active()` loop
/// (binding 0 the structure, binding 1 the active-block buffer): pass 0, one invocation per
/// leaf block, appends the live ones; pass 1, one invocation, writes the indirect dispatch of
/// `cells per leaf block * count` invocations (split in 2-D beyond `max_groups_x` workgroups),
/// keeps the count for the loop and resets the counter.
pub fn compaction_shaders(plan: &Structure, local_size: u32, max_groups_x: u32) -> [String; 2] {
    let mut head = format!("#version 450\nlayout(local_size_x = {local_size}) in;\n");
    head.push_str(&tree_declaration(0, 0, plan));
    head.push_str(&active_declaration(0, 1));
    let id = format!(
        "    uint mpm_id = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * {local_size}u + gl_LocalInvocationID.x;\n"
    );
    let mut compact = head.clone();
    compact.push_str(&leaf_origin(0, plan));
    compact.push_str("void main() {\n");
    compact.push_str(&id);
    writeln!(
        compact,
        "    if (mpm_id >= {blocks}u) return;\n    uvec3 c;\n    if (!t0_leaf_origin(mpm_id, c)) return;\n    \
         uint slot = atomicAdd(a0.w[{ACTIVE_COUNTER}u], 1u);\n    a0.w[{ACTIVE_LIST}u + slot] = mpm_id;\n}}",
        blocks = leaf_blocks(plan)
    )
    .unwrap();
    let cells = plan.levels.last().map_or(1, |p| p.level.cells());
    let mut indirect = head;
    writeln!(
        indirect,
        "void main() {{\n    if (gl_GlobalInvocationID.x != 0u) return;\n    \
         uint n = a0.w[{ACTIVE_COUNTER}u];\n    a0.w[{ACTIVE_COUNTER}u] = 0u;\n    a0.w[{ACTIVE_COUNT}u] = n;\n    \
         uint invocations = n * {cells}u;\n    \
         uint groups = invocations / {local_size}u + (invocations % {local_size}u != 0u ? 1u : 0u);\n    \
         uint gx = min(groups, {max_groups_x}u);\n    \
         a0.w[0] = gx;\n    a0.w[1] = gx == 0u ? 1u : (groups + gx - 1u) / gx;\n    a0.w[2] = 1u;\n}}"
    )
    .unwrap();
    [compact, indirect]
}

#[cfg(test)]
mod tests {
    #[test]
    fn slot_markers_match_the_core() {
        assert_eq!(super::EMPTY, format!("{:#x}u", mpm_core::layout::EMPTY));
        assert_eq!(super::LOCKED, format!("{:#x}u", mpm_core::layout::LOCKED));
    }
}
