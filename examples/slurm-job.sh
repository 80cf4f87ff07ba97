#!/bin/bash
#SBATCH --job-name=tessera-job
#SBATCH --nodes=3
#SBATCH --ntasks-per-node=2
#
# A Slurm job on Tessera: start one daemon per node of the allocation, run an MPI program
# that writes under /tessera through the interposer, flush its output to the PFS directory,
# stop Tessera. Submit with
#
#   sbatch examples/slurm-job.sh PROGRAM [ARGS...]
#
# Settings (environment, all optional):
#   TESSERA_INSTANCE  instance directory on the shared file system ($HOME/tessera/JOBID)
#   TESSERA_BB        node-local burst-buffer root, the same path on every node
#                     (/mnt/tessera-local/tessera-JOBID)
#   TESSERA_PFS       where flushed files go ($SLURM_SUBMIT_DIR/tessera-out)
#   TESSERA_OUTPUT    the Tessera file the program writes, flushed at the end (/tessera/out)
#   TESSERA_PRELOAD   the interposer (libtessera_preload.so beside the tessera command)
set -euo pipefail

: "${SLURM_JOB_ID:?run this under sbatch or salloc}"
[ $# -ge 1 ] || { echo "usage: sbatch $0 PROGRAM [ARGS...]" >&2; exit 2; }
tessera=$(command -v tessera) || { echo "tessera is not in PATH" >&2; exit 2; }
export TESSERA_INSTANCE="${TESSERA_INSTANCE:-$HOME/tessera/$SLURM_JOB_ID}"
bb="${TESSERA_BB:-/mnt/tessera-local/tessera-$SLURM_JOB_ID}"
pfs="${TESSERA_PFS:-${SLURM_SUBMIT_DIR:-$PWD}/tessera-out}"
output="${TESSERA_OUTPUT:-/tessera/out}"
preload="${TESSERA_PRELOAD:-$(dirname "$tessera")/libtessera_preload.so}"
[ -f "$preload" ] || preload="$(dirname "$tessera")/../lib/libtessera_preload.so"

# One daemon per node, through srun; returns once every node has registered.
tessera start --pfs "$pfs" --bb-root "$bb"
# Stopped whatever happens below; stopping twice is harmless.
trap 'tessera stop' EXIT

# The job itself: unmodified MPI ranks, Tessera paths through the interposer. Each rank talks
# to the daemon of its own node.
mpirun --map-by node -x LD_PRELOAD="$preload" -x TESSERA_INSTANCE "$@"

# Publish the result to the PFS directory (atomically: readers never see half a file).
tessera flush "$output"
# Where its bytes are (for a scheduler: --json), and a follow-up task run on the node that
# holds most of them (through srun, or directly on this node).
tessera where "$output"
tessera run 'wc -c < {}' "$output"
tessera status
