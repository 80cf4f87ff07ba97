//! MPI datatypes and file views read at run time, for the exact byte ranges of an atomic access.
//!
//! The interposer links no MPI: it reaches `PMPI_Type_get_envelope`, `PMPI_Type_get_contents`
//! and friends by name in whichever library the program loaded. Open MPI and MPICH number the
//! combiners differently (Open MPI's enum starts at `MPI_COMBINER_NAMED = 0`, MPICH's at 1, and
//! their orders differ) and their handles differ (pointers in Open MPI, `int` in MPICH), so the
//! constants are chosen by [`open_mpi`]. The constructor tree read here is flattened by
//! `tessera_core::datatype`; a type it cannot follow (a cyclic `darray`, the Fortran types, more than
//! [`MAX_BLOCKS`] blocks) gives `None`, and the caller locks more than the exact bytes.

use crate::mpiio::open_mpi;
use libc::{c_int, c_void};
use tessera_core::datatype::{Distribution, Flat, Shape, TypeTree};
use tessera_core::file_view::FileView;
use tessera_core::run::Run;

/// An MPI handle forwarded as a machine word (see the mpiio module docs).
type Handle = usize;

/// Most blocks one flattened filetype may have before the exact ranges are given up.
pub const MAX_BLOCKS: usize = 1 << 20;

/// Deepest constructor tree followed.
const MAX_DEPTH: u32 = 32;

/// The combiner numbers of one MPI library.
struct Combiners {
    named: c_int,
    dup: c_int,
    contiguous: c_int,
    vector: c_int,
    hvector: c_int,
    indexed: c_int,
    hindexed: c_int,
    indexed_block: c_int,
    hindexed_block: c_int,
    structure: c_int,
    subarray: c_int,
    darray: c_int,
    resized: c_int,
    order_fortran: c_int,
    distribute_block: c_int,
    distribute_cyclic: c_int,
    distribute_none: c_int,
    distribute_dflt_darg: c_int,
}

/// Open MPI 4.1's `mpi.h`.
const OPEN_MPI: Combiners = Combiners {
    named: 0,
    dup: 1,
    contiguous: 2,
    vector: 3,
    hvector: 5,
    indexed: 6,
    hindexed: 8,
    indexed_block: 9,
    hindexed_block: 18,
    structure: 11,
    subarray: 12,
    darray: 13,
    resized: 17,
    order_fortran: 1,
    distribute_block: 0,
    distribute_cyclic: 1,
    distribute_none: 2,
    distribute_dflt_darg: -1,
};

/// MPICH 4.0's `mpi.h`.
const MPICH: Combiners = Combiners {
    named: 1,
    dup: 2,
    contiguous: 3,
    vector: 4,
    hvector: 6,
    indexed: 7,
    hindexed: 9,
    indexed_block: 10,
    hindexed_block: 19,
    structure: 12,
    subarray: 13,
    darray: 14,
    resized: 18,
    order_fortran: 57,
    distribute_block: 121,
    distribute_cyclic: 122,
    distribute_none: 123,
    distribute_dflt_darg: -49767,
};

fn combiners() -> &'static Combiners {
    if open_mpi() { &OPEN_MPI } else { &MPICH }
}

/// Reads an array of datatype handles MPI wrote (pointers or `int`s).
fn handles(raw: &[u64], n: usize) -> Vec<Handle> {
    if open_mpi() {
        raw[..n].iter().map(|h| *h as Handle).collect()
    } else {
        // SAFETY: the buffer holds `n` ints (MPICH's handle type), inside `raw`'s bytes.
        let ints = unsafe { std::slice::from_raw_parts(raw.as_ptr().cast::<i32>(), n) };
        ints.iter().map(|h| *h as u32 as Handle).collect()
    }
}

/// The combiner of `dt`, and the counts of its contents.
fn envelope(dt: Handle) -> Option<(c_int, [usize; 3])> {
    let get = next!(PMPI_Type_get_envelope: fn(Handle, *mut c_int, *mut c_int, *mut c_int, *mut c_int) -> c_int);
    let (mut ni, mut na, mut nd, mut comb) = (0, 0, 0, 0);
    // SAFETY: a datatype handle and four ints to fill.
    let rc = unsafe { get(dt, &mut ni, &mut na, &mut nd, &mut comb) };
    let n = |x: c_int| usize::try_from(x).ok();
    (rc == 0).then_some(())?;
    Some((comb, [n(ni)?, n(na)?, n(nd)?]))
}

/// The bounds MPI reports for `dt`.
fn extent(dt: Handle) -> Option<(i64, i64)> {
    let get = next!(PMPI_Type_get_extent: fn(Handle, *mut i64, *mut i64) -> c_int);
    let (mut lb, mut ext) = (0i64, 0i64);
    // SAFETY: a datatype handle and two MPI_Aints to fill.
    (unsafe { get(dt, &mut lb, &mut ext) } == 0).then_some((lb, ext))
}

/// The data bytes of one `dt`.
pub fn size(dt: Handle) -> Option<u64> {
    let get = next!(PMPI_Type_size_x: fn(Handle, *mut i64) -> c_int);
    let mut n = 0i64;
    // SAFETY: a datatype handle and an MPI_Count to fill.
    let rc = unsafe { get(dt, &mut n) };
    if rc == 0 { u64::try_from(n).ok() } else { None }
}

/// Frees a handle MPI returned, unless it names a predefined type (which must not be freed).
fn release(dt: Handle) {
    if envelope(dt).is_some_and(|(c, _)| c != combiners().named) {
        let free = next!(PMPI_Type_free: fn(*mut c_void) -> c_int);
        let mut h = dt;
        if open_mpi() {
            // SAFETY: a derived handle MPI handed out for us to free.
            unsafe { free((&mut h as *mut Handle).cast()) };
        } else {
            let mut i = dt as u32 as i32;
            // SAFETY: as above, as MPICH's int handle.
            unsafe { free((&mut i as *mut i32).cast()) };
        }
    }
}

/// The constructor tree of `dt`, or `None` for a type it cannot follow.
pub fn tree(dt: Handle) -> Option<TypeTree> {
    tree_at(dt, 0)
}

fn tree_at(dt: Handle, depth: u32) -> Option<TypeTree> {
    if depth > MAX_DEPTH {
        return None;
    }
    let (comb, [ni, na, nd]) = envelope(dt)?;
    let (lb, ext) = extent(dt)?;
    let c = combiners();
    if comb == c.named {
        return Some(TypeTree {
            shape: Shape::Named { size: size(dt)? },
            lb,
            extent: ext,
        });
    }
    let mut ints = vec![0 as c_int; ni];
    let mut addrs = vec![0i64; na];
    let mut types = vec![0u64; nd];
    let get = next!(PMPI_Type_get_contents: fn(Handle, c_int, c_int, c_int, *mut c_int, *mut i64, *mut u64) -> c_int);
    // SAFETY: arrays of the sizes the envelope gave (a u64 holds a handle of either MPI).
    let rc = unsafe {
        get(
            dt,
            ni as c_int,
            na as c_int,
            nd as c_int,
            ints.as_mut_ptr(),
            addrs.as_mut_ptr(),
            types.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return None;
    }
    let children = handles(&types, nd);
    let shape = shape_of(comb, c, &ints, &addrs, &children, depth);
    for h in children {
        release(h);
    }
    Some(TypeTree {
        shape: shape?,
        lb,
        extent: ext,
    })
}

/// Builds one node from its contents (`MPI_Type_get_contents`' layout per combiner).
fn shape_of(
    comb: c_int,
    c: &Combiners,
    ints: &[c_int],
    addrs: &[i64],
    types: &[Handle],
    depth: u32,
) -> Option<Shape> {
    let u = |i: usize| ints.get(i).and_then(|x| u64::try_from(*x).ok());
    let child =
        |k: usize| -> Option<Box<TypeTree>> { Some(Box::new(tree_at(*types.get(k)?, depth + 1)?)) };
    // Not every combiner has counts (a dup has none).
    let count = u(0).unwrap_or(0) as usize;
    let shape = if comb == c.dup || comb == c.resized {
        Shape::Same { child: child(0)? }
    } else if comb == c.contiguous {
        Shape::Contiguous {
            count: u(0)?,
            child: child(0)?,
        }
    } else if comb == c.vector || comb == c.hvector {
        let bytes = comb == c.hvector;
        Shape::Vector {
            count: u(0)?,
            blocklen: u(1)?,
            stride: if bytes {
                *addrs.first()?
            } else {
                i64::from(*ints.get(2)?)
            },
            bytes,
            child: child(0)?,
        }
    } else if comb == c.indexed {
        let blocks = (0..count)
            .map(|i| Some((u(1 + i)?, i64::from(*ints.get(1 + count + i)?))))
            .collect::<Option<Vec<_>>>()?;
        Shape::Indexed {
            blocks,
            bytes: false,
            child: child(0)?,
        }
    } else if comb == c.hindexed {
        let blocks = (0..count)
            .map(|i| Some((u(1 + i)?, *addrs.get(i)?)))
            .collect::<Option<Vec<_>>>()?;
        Shape::Indexed {
            blocks,
            bytes: true,
            child: child(0)?,
        }
    } else if comb == c.indexed_block {
        let blocks = (0..count)
            .map(|i| Some((u(1)?, i64::from(*ints.get(2 + i)?))))
            .collect::<Option<Vec<_>>>()?;
        Shape::Indexed {
            blocks,
            bytes: false,
            child: child(0)?,
        }
    } else if comb == c.hindexed_block {
        let blocks = (0..count)
            .map(|i| Some((u(1)?, *addrs.get(i)?)))
            .collect::<Option<Vec<_>>>()?;
        Shape::Indexed {
            blocks,
            bytes: true,
            child: child(0)?,
        }
    } else if comb == c.structure {
        let fields = (0..count)
            .map(|i| Some((u(1 + i)?, *addrs.get(i)?, *child(i)?)))
            .collect::<Option<Vec<_>>>()?;
        Shape::Struct { fields }
    } else if comb == c.subarray {
        let nd = count;
        let list = |from: usize| (0..nd).map(|i| u(from + i)).collect::<Option<Vec<u64>>>();
        Shape::Subarray {
            sizes: list(1)?,
            subsizes: list(1 + nd)?,
            starts: list(1 + 2 * nd)?,
            fortran: *ints.get(1 + 3 * nd)? == c.order_fortran,
            child: child(0)?,
        }
    } else if comb == c.darray {
        // size, rank, ndims, gsizes, distribs, dargs, psizes, order.
        let nd = u(2)? as usize;
        let list = |from: usize| (0..nd).map(|i| u(from + i)).collect::<Option<Vec<u64>>>();
        let distribs = (0..nd)
            .map(|i| {
                let (d, arg) = (*ints.get(3 + nd + i)?, *ints.get(3 + 2 * nd + i)?);
                Some(if d == c.distribute_none {
                    Distribution::Whole
                } else if d == c.distribute_block && arg == c.distribute_dflt_darg {
                    Distribution::Block(None)
                } else if d == c.distribute_block {
                    Distribution::Block(Some(u64::try_from(arg).ok()?))
                } else if d == c.distribute_cyclic {
                    Distribution::Cyclic
                } else {
                    return None;
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Shape::darray(
            u(0)?,
            u(1)?,
            &list(3)?,
            &distribs,
            &list(3 + 3 * nd)?,
            *ints.get(3 + 4 * nd)? == c.order_fortran,
            *child(0)?,
        )?
    } else {
        return None;
    };
    Some(shape)
}

/// The flattened view of file `fh`, or `None` if its filetype cannot be followed. Checks the
/// flattened size against MPI's own before trusting it.
pub fn file_view(fh: Handle) -> Option<FileView> {
    let get = next!(PMPI_File_get_view: fn(Handle, *mut i64, *mut u64, *mut u64, *mut u8) -> c_int);
    let (mut disp, mut etype, mut filetype) = (0i64, 0u64, 0u64);
    let mut rep = [0u8; 256];
    // SAFETY: a file handle, an MPI_Offset, two handle slots (zeroed: MPICH fills 4 bytes) and
    // a buffer larger than MPI_MAX_DATAREP_STRING.
    let rc = unsafe { get(fh, &mut disp, &mut etype, &mut filetype, rep.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    let etype = etype as Handle;
    let filetype = filetype as Handle;
    let view = (|| {
        let esize = size(etype)?;
        let flat: Flat = tree(filetype)?.flatten(MAX_BLOCKS)?;
        if flat.size() != size(filetype)? {
            return None;
        }
        // Offsets relative to the type's lower bound, where its tiles start.
        let blocks = flat
            .blocks
            .iter()
            .map(|&(off, len)| Some((u64::try_from(off - flat.lb).ok()?, len)))
            .collect::<Option<Vec<_>>>()?;
        let start = u64::try_from(disp.checked_add(flat.lb)?).ok()?;
        FileView::new(start, esize, blocks, u64::try_from(flat.extent).ok()?).ok()
    })();
    release(etype);
    release(filetype);
    view
}

/// The individual file pointer of `fh`, in etypes of its view.
pub fn position(fh: Handle) -> Option<u64> {
    let get = next!(PMPI_File_get_position: fn(Handle, *mut i64) -> c_int);
    let mut off = 0i64;
    // SAFETY: a file handle and an MPI_Offset to fill.
    let rc = unsafe { get(fh, &mut off) };
    if rc == 0 {
        u64::try_from(off).ok()
    } else {
        None
    }
}

/// The file bytes an access of `count` items of `dt` at view offset `offset` touches.
pub fn access_runs(view: &FileView, offset: u64, count: c_int, dt: Handle) -> Option<Vec<Run>> {
    let nbytes = u64::try_from(count).ok()?.checked_mul(size(dt)?)?;
    view.access_runs(offset, nbytes).ok()
}
