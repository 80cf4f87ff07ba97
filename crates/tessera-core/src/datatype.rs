//! MPI derived datatypes as trees, flattened into the byte blocks of one instance.
//!
//! The interposer rebuilds a datatype's constructor tree at run time (the envelope and
//! contents calls of whichever MPI is loaded) and flattens it here, to learn which bytes a
//! file view covers. Every node carries the lower bound and extent MPI itself reports for it,
//! so alignment padding and resized types tile exactly as MPI tiles them; the caller checks the
//! flattened size against MPI's size of the type before trusting it.

/// A datatype's constructor, with its children. Displacements are in bytes except where named
/// in elements (multiples of the child's extent), as in the MPI constructors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A predefined type of `size` bytes.
    Named {
        size: u64,
    },
    Contiguous {
        count: u64,
        child: Box<TypeTree>,
    },
    /// `count` blocks of `blocklen` children, `stride` apart: in elements (`bytes: false`,
    /// `MPI_Type_vector`) or bytes (`MPI_Type_create_hvector`).
    Vector {
        count: u64,
        blocklen: u64,
        stride: i64,
        bytes: bool,
        child: Box<TypeTree>,
    },
    /// Blocks of (children, displacement): in elements (`indexed`, `indexed_block`) or bytes
    /// (`hindexed`, `hindexed_block`).
    Indexed {
        blocks: Vec<(u64, i64)>,
        bytes: bool,
        child: Box<TypeTree>,
    },
    /// Fields of (count, byte displacement, type).
    Struct {
        fields: Vec<(u64, i64, TypeTree)>,
    },
    /// `MPI_Type_create_subarray`: `fortran` for column-major order.
    Subarray {
        sizes: Vec<u64>,
        subsizes: Vec<u64>,
        starts: Vec<u64>,
        fortran: bool,
        child: Box<TypeTree>,
    },
    /// `MPI_Type_create_resized` or `MPI_Type_dup`: the child's bytes, this node's bounds.
    Same {
        child: Box<TypeTree>,
    },
}

/// How one dimension of an `MPI_Type_create_darray` is distributed over its processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// Blocks of `darg` elements (`None`: the default, the dimension split evenly, rounded up).
    Block(Option<u64>),
    /// Not distributed (one process along it).
    Whole,
    /// Cyclic distribution: not followed (the caller locks more than the exact bytes).
    Cyclic,
}

impl Shape {
    /// The part of a darray that process `rank` of `size` holds, as the subarray it is: block
    /// and undistributed dimensions only (`None` for a cyclic one, or bad arguments). The
    /// process grid is row-major whatever the array's order, as MPI defines it.
    pub fn darray(
        size: u64,
        rank: u64,
        gsizes: &[u64],
        distribs: &[Distribution],
        psizes: &[u64],
        fortran: bool,
        child: TypeTree,
    ) -> Option<Shape> {
        let dims = gsizes.len();
        if dims == 0 || distribs.len() != dims || psizes.len() != dims || rank >= size {
            return None;
        }
        if psizes.iter().try_fold(1u64, |a, p| a.checked_mul(*p))? != size {
            return None;
        }
        let (mut subsizes, mut starts) = (vec![0; dims], vec![0; dims]);
        let mut left = size;
        let mut r = rank;
        for d in 0..dims {
            left /= psizes[d];
            let coord = r / left;
            r %= left;
            let block = match distribs[d] {
                Distribution::Whole => gsizes[d],
                Distribution::Block(None) => gsizes[d].div_ceil(psizes[d]),
                Distribution::Block(Some(b)) => b,
                Distribution::Cyclic => return None,
            };
            let start = coord.checked_mul(block)?.min(gsizes[d]);
            starts[d] = start;
            subsizes[d] = block.min(gsizes[d] - start);
        }
        Some(Shape::Subarray {
            sizes: gsizes.to_vec(),
            subsizes,
            starts,
            fortran,
            child: Box::new(child),
        })
    }
}

/// A datatype: its constructor and the bounds MPI reports for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeTree {
    pub shape: Shape,
    pub lb: i64,
    pub extent: i64,
}

/// One instance of a type as sorted, disjoint byte blocks `(displacement, len)` (touching
/// blocks joined), and its bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flat {
    pub blocks: Vec<(i64, u64)>,
    pub lb: i64,
    pub extent: i64,
}

impl Flat {
    /// Data bytes of one instance.
    pub fn size(&self) -> u64 {
        self.blocks.iter().map(|b| b.1).sum()
    }
}

impl TypeTree {
    /// The blocks of one instance, or `None` past `max_blocks` blocks (or on arithmetic
    /// overflow): the caller then locks more than the exact bytes.
    pub fn flatten(&self, max_blocks: usize) -> Option<Flat> {
        let mut raw = Vec::new();
        self.place(0, &mut raw, max_blocks)?;
        raw.sort_unstable();
        let mut blocks: Vec<(i64, u64)> = Vec::with_capacity(raw.len());
        for (off, len) in raw.into_iter().filter(|b| b.1 > 0) {
            match blocks.last_mut() {
                Some(last) if off <= last.0 + last.1 as i64 => {
                    let end = (last.0 + last.1 as i64).max(off + len as i64);
                    last.1 = (end - last.0) as u64;
                }
                _ => blocks.push((off, len)),
            }
        }
        Some(Flat {
            blocks,
            lb: self.lb,
            extent: self.extent,
        })
    }

    /// Appends the blocks of this type placed at `at`.
    fn place(&self, at: i64, out: &mut Vec<(i64, u64)>, max: usize) -> Option<()> {
        let push = |out: &mut Vec<(i64, u64)>, off: i64, len: u64| {
            if out.len() >= max {
                return None;
            }
            out.push((off, len));
            Some(())
        };
        // Places `n` consecutive children from `start` (contiguous children become one block).
        let run = |out: &mut Vec<(i64, u64)>, child: &TypeTree, start: i64, n: u64| -> Option<()> {
            if let Some(len) = child.dense_len()
                && child.lb == 0
            {
                let total = len.checked_mul(n)?;
                if out.len() >= max {
                    return None;
                }
                out.push((start, total));
                return Some(());
            }
            for i in 0..n {
                let shift = i64::try_from(i).ok()?.checked_mul(child.extent)?;
                child.place(start.checked_add(shift)?, out, max)?;
            }
            Some(())
        };
        match &self.shape {
            Shape::Named { size } => push(out, at, *size)?,
            Shape::Same { child } => child.place(at, out, max)?,
            Shape::Contiguous { count, child } => run(out, child, at, *count)?,
            Shape::Vector {
                count,
                blocklen,
                stride,
                bytes,
                child,
            } => {
                let step = if *bytes {
                    *stride
                } else {
                    stride.checked_mul(child.extent)?
                };
                for i in 0..*count {
                    let start = at.checked_add(i64::try_from(i).ok()?.checked_mul(step)?)?;
                    run(out, child, start, *blocklen)?;
                }
            }
            Shape::Indexed {
                blocks,
                bytes,
                child,
            } => {
                for &(n, displ) in blocks {
                    let d = if *bytes {
                        displ
                    } else {
                        displ.checked_mul(child.extent)?
                    };
                    run(out, child, at.checked_add(d)?, n)?;
                }
            }
            Shape::Struct { fields } => {
                for (n, displ, t) in fields {
                    run(out, t, at.checked_add(*displ)?, *n)?;
                }
            }
            Shape::Subarray {
                sizes,
                subsizes,
                starts,
                fortran,
                child,
            } => {
                let dims = sizes.len();
                if dims == 0 || subsizes.len() != dims || starts.len() != dims {
                    return None;
                }
                // Dimensions from slowest to fastest.
                let order: Vec<usize> = if *fortran {
                    (0..dims).rev().collect()
                } else {
                    (0..dims).collect()
                };
                let mut strides = vec![1u64; dims];
                for k in (0..dims - 1).rev() {
                    strides[k] = strides[k + 1].checked_mul(sizes[order[k + 1]])?;
                }
                let fastest = order[dims - 1];
                let row = subsizes[fastest];
                if subsizes.contains(&0) {
                    return Some(());
                }
                // Every index of the slower dimensions, odometer style.
                let mut idx = vec![0u64; dims - 1];
                loop {
                    let mut elem = starts[fastest];
                    for k in 0..dims - 1 {
                        let d = order[k];
                        elem = elem.checked_add((starts[d] + idx[k]).checked_mul(strides[k])?)?;
                    }
                    let off = i64::try_from(elem).ok()?.checked_mul(child.extent)?;
                    run(out, child, at.checked_add(off)?, row)?;
                    let mut k = dims - 1;
                    loop {
                        if k == 0 {
                            return Some(());
                        }
                        k -= 1;
                        idx[k] += 1;
                        if idx[k] < subsizes[order[k]] {
                            break;
                        }
                        idx[k] = 0;
                    }
                }
            }
        }
        Some(())
    }

    /// The size of a type with no holes and no padding (its bytes fill `[lb, lb + extent)`),
    /// or `None`.
    fn dense_len(&self) -> Option<u64> {
        let size = match &self.shape {
            Shape::Named { size } => *size,
            Shape::Same { child } | Shape::Contiguous { child, .. } => {
                let n = match &self.shape {
                    Shape::Contiguous { count, .. } => *count,
                    _ => 1,
                };
                child.dense_len()?.checked_mul(n)?
            }
            _ => return None,
        };
        (i64::try_from(size).ok()? == self.extent).then_some(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int() -> TypeTree {
        TypeTree {
            shape: Shape::Named { size: 4 },
            lb: 0,
            extent: 4,
        }
    }

    #[test]
    fn a_block_of_a_cube_is_rows() {
        // Rank (1, 0, 1) of a 2x2x2 grid over a 4x4x4 cube of ints, C order.
        let t = TypeTree {
            shape: Shape::Subarray {
                sizes: vec![4, 4, 4],
                subsizes: vec![2, 2, 2],
                starts: vec![2, 0, 2],
                fortran: false,
                child: Box::new(int()),
            },
            lb: 0,
            extent: 256,
        };
        let f = t.flatten(1 << 20).unwrap();
        let rows: Vec<(i64, u64)> = vec![(136, 8), (152, 8), (200, 8), (216, 8)];
        assert_eq!(f.blocks, rows);
        assert_eq!(f.size(), 32);
        assert!(t.flatten(3).is_none(), "over the block limit");
    }

    #[test]
    fn vectors_structs_and_resized_types() {
        let vec = TypeTree {
            shape: Shape::Vector {
                count: 3,
                blocklen: 2,
                stride: 5,
                bytes: false,
                child: Box::new(int()),
            },
            lb: 0,
            extent: 48,
        };
        assert_eq!(
            vec.flatten(100).unwrap().blocks,
            vec![(0, 8), (20, 8), (40, 8)]
        );
        let resized = TypeTree {
            shape: Shape::Same {
                child: Box::new(vec.clone()),
            },
            lb: 0,
            extent: 100,
        };
        let st = TypeTree {
            shape: Shape::Struct {
                fields: vec![(2, 0, resized), (1, 300, int())],
            },
            lb: 0,
            extent: 304,
        };
        assert_eq!(
            st.flatten(100).unwrap().blocks,
            vec![
                (0, 8),
                (20, 8),
                (40, 8),
                (100, 8),
                (120, 8),
                (140, 8),
                (300, 4)
            ]
        );
        let idx = TypeTree {
            shape: Shape::Indexed {
                blocks: vec![(1, 3), (2, 0)],
                bytes: false,
                child: Box::new(int()),
            },
            lb: 0,
            extent: 16,
        };
        assert_eq!(idx.flatten(100).unwrap().blocks, vec![(0, 8), (12, 4)]);
    }

    #[test]
    fn a_darray_block_is_its_rank_subarray() {
        // 27 ranks over a 10^3 cube: blocks of 4, 4 and 2 along each dimension.
        let blocks = [Distribution::Block(None); 3];
        let s = Shape::darray(27, 26, &[10, 10, 10], &blocks, &[3, 3, 3], false, int()).unwrap();
        match s {
            Shape::Subarray {
                subsizes, starts, ..
            } => {
                assert_eq!(subsizes, vec![2, 2, 2]);
                assert_eq!(starts, vec![8, 8, 8]);
            }
            other => panic!("{other:?}"),
        }
        let s = Shape::darray(4, 1, &[8, 6], &blocks[..2], &[2, 2], false, int()).unwrap();
        let t = TypeTree {
            shape: s,
            lb: 0,
            extent: 192,
        };
        // Rank 1 is grid (0, 1): rows 0..4, columns 3..6.
        let f = t.flatten(100).unwrap();
        assert_eq!(f.blocks, vec![(12, 12), (36, 12), (60, 12), (84, 12)]);
        assert!(Shape::darray(4, 1, &[8], &[Distribution::Cyclic], &[4], false, int()).is_none());
        assert!(Shape::darray(4, 1, &[8, 6], &blocks[..2], &[2, 3], false, int()).is_none());
    }

    #[test]
    fn fortran_order_runs_along_the_first_dimension() {
        let t = TypeTree {
            shape: Shape::Subarray {
                sizes: vec![4, 3],
                subsizes: vec![2, 2],
                starts: vec![1, 1],
                fortran: true,
                child: Box::new(int()),
            },
            lb: 0,
            extent: 48,
        };
        // Column-major: element (i, j) at i + 4 j.
        assert_eq!(t.flatten(100).unwrap().blocks, vec![(20, 8), (36, 8)]);
    }
}
