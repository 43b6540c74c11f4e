//! Runs across processes: [`Mpi`] starts MPI and hands each solver a [`Ranks`] on its
//! world communicator (see `mpm_core::solver::ranks` for the decomposition itself).

use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;
use mpi::Count;

use mpm_core::solver::{Ranks, Result, SolverError};

/// MPI, started for the life of the value (dropping it finalises MPI).
pub struct Mpi {
    universe: Universe,
}

impl Mpi {
    /// Starts MPI; `None` when it was started already.
    pub fn start() -> Option<Mpi> {
        mpi::initialize().map(|universe| Mpi { universe })
    }

    /// Whether this process was started by an MPI launcher (`mpirun`), so that a program
    /// run alone does not start MPI at all.
    pub fn launched() -> bool {
        ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"]
            .iter()
            .any(|v| std::env::var_os(v).is_some())
    }

    pub fn rank(&self) -> usize {
        self.universe.world().rank() as usize
    }

    pub fn size(&self) -> usize {
        self.universe.world().size() as usize
    }

    /// This process's rank among those on its machine (to pick its GPU).
    pub fn local_rank(&self) -> usize {
        self.universe.world().split_shared(0).rank() as usize
    }

    /// Where this rank runs: its GPU ([`Mpi::device`]) and the ranks sharing its machine's
    /// cores (a CPU rank takes its share of them).
    pub fn placement(&self) -> crate::peers::Placement {
        crate::peers::Placement {
            device: self.device(),
            ranks_on_machine: self.universe.world().split_shared(0).size() as usize,
        }
    }

    /// The Vulkan device this rank takes where the machine has several GPUs: the
    /// `local_rank`-th in the order `--backend auto` prefers them, round robin; `None` to
    /// choose as alone (one GPU, or `MPM_VK_DEVICE` set, which every rank then takes).
    pub fn device(&self) -> Option<String> {
        if std::env::var_os("MPM_VK_DEVICE").is_some() {
            return None;
        }
        let mut gpus: Vec<_> = mpm_vulkan::list_devices()
            .ok()?
            .into_iter()
            .filter(|d| matches!(d.device_type.as_str(), "discrete" | "integrated"))
            .collect();
        gpus.sort_by_key(|d| (d.device_type != "discrete", d.index));
        (gpus.len() > 1).then(|| gpus[self.local_rank() % gpus.len()].index.to_string())
    }

    /// The world's ranks, for `Solver::decompose`.
    pub fn ranks(&self) -> Box<dyn Ranks> {
        world_ranks()
    }

    /// Ends every rank's run: what a failing rank does, so that none waits for it forever.
    pub fn abort(&self, code: i32) -> ! {
        self.universe.world().abort(code)
    }
}

/// The world's ranks (MPI must be started: see [`Mpi::start`]).
pub fn world_ranks() -> Box<dyn Ranks> {
    Box::new(WorldRanks {
        world: SimpleCommunicator::world(),
    })
}

/// [`Ranks`] on MPI's world communicator. MPI's default error handler ends the run on a
/// failed call, so the calls here do not fail one by one.
struct WorldRanks {
    world: SimpleCommunicator,
}

impl Ranks for WorldRanks {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn exchange(&self, to: Vec<Vec<u32>>) -> Result<Vec<Vec<u32>>> {
        let size = self.size();
        if to.len() != size {
            return Err(SolverError::InvalidParameter(format!(
                "an exchange among {size} ranks got {} messages",
                to.len()
            )));
        }
        let count = |n: usize| {
            Count::try_from(n).map_err(|_| {
                SolverError::InvalidParameter(format!(
                    "a message of {n} words is beyond MPI's count"
                ))
            })
        };
        let send_counts = to
            .iter()
            .map(|m| count(m.len()))
            .collect::<Result<Vec<_>>>()?;
        let mut recv_counts = vec![0 as Count; size];
        self.world
            .all_to_all_into(&send_counts[..], &mut recv_counts[..]);
        let displacements = |counts: &[Count]| -> Vec<Count> {
            counts
                .iter()
                .scan(0, |at, &c| {
                    let here = *at;
                    *at += c;
                    Some(here)
                })
                .collect()
        };
        let send: Vec<u32> = to.concat();
        let send_at = displacements(&send_counts);
        let recv_at = displacements(&recv_counts);
        let total = recv_counts.iter().map(|&c| c as usize).sum();
        let mut recv = vec![0u32; total];
        {
            let outgoing = Partition::new(&send[..], &send_counts[..], &send_at[..]);
            let mut incoming = PartitionMut::new(&mut recv[..], &recv_counts[..], &recv_at[..]);
            self.world
                .all_to_all_varcount_into(&outgoing, &mut incoming);
        }
        Ok(recv_at
            .iter()
            .zip(&recv_counts)
            .map(|(&at, &n)| recv[at as usize..(at + n) as usize].to_vec())
            .collect())
    }

    fn sum(&self, values: &mut [f64]) -> Result<()> {
        let mine = values.to_vec();
        self.world
            .all_reduce_into(&mine[..], values, SystemOperation::sum());
        Ok(())
    }

    fn max(&self, value: f64) -> Result<f64> {
        let mut out = value;
        self.world
            .all_reduce_into(&value, &mut out, SystemOperation::max());
        Ok(out)
    }
}
