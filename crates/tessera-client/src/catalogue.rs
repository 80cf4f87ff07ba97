//! The catalogue of variables and chunks (D2T's metadata service), from a process: in a
//! transaction (after `txn_join`) creates, chunks and deletes are pending until it commits and
//! seen meanwhile only by its members; outside one, each is visible at once. Lookups read a
//! committed version whole (a snapshot: version k's chunks stay the same while k + 1
//! commits).

use crate::{Client, OpenOptions};
use std::time::Duration;
use tessera_core::catalogue::{Chunk, Variable, VersionView};
use tessera_core::hyperslab::{Slab, for_each_run};
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::{CatChange, CatList, CatLookup, CatWait, CatalogueOp};

impl Client {
    /// Creates a new version of `variable` (numbered when it commits).
    pub fn cat_create(&self, variable: Variable) -> FsResult<()> {
        self.lock().call(CatChange {
            op: CatalogueOp::Create(variable),
        })
    }

    /// Adds `chunk` to the version of `name` this transaction creates (outside a
    /// transaction: to its newest version).
    pub fn cat_add_chunk(&self, name: &str, chunk: Chunk) -> FsResult<()> {
        self.lock().call(CatChange {
            op: CatalogueOp::AddChunk {
                name: name.to_string(),
                chunk,
            },
        })
    }

    /// Deletes every version of `name` (when the transaction commits).
    pub fn cat_delete(&self, name: &str) -> FsResult<()> {
        self.lock().call(CatChange {
            op: CatalogueOp::Delete {
                name: name.to_string(),
            },
        })
    }

    /// Version `version` of `name` (`None`: the newest; in a transaction that creates it,
    /// the pending one, numbered 0).
    pub fn cat_lookup(&self, name: &str, version: Option<u64>) -> FsResult<VersionView> {
        self.lock().call(CatLookup {
            name: name.to_string(),
            version,
        })
    }

    /// Every variable with its newest version.
    pub fn cat_list(&self) -> FsResult<Vec<(String, u64)>> {
        self.lock().call(CatList {})
    }

    /// Waits until `name` has a committed version of at least `version` (at most
    /// `timeout`): the newest version then, or `ETIMEDOUT`.
    pub fn cat_wait(&self, name: &str, version: u64, timeout: Duration) -> FsResult<u64> {
        self.lock().call(CatWait {
            name: name.to_string(),
            version,
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// Writes `bytes`, the hyperslab `slab` of `name` in C order, at `offset` of the file
    /// `path` (made if missing) and adds it as a chunk of the version being made. In a
    /// transaction both are pending until it commits.
    pub fn cat_put(
        &self,
        name: &str,
        slab: Slab<'_>,
        bytes: &[u8],
        path: &str,
        offset: u64,
    ) -> FsResult<()> {
        let mut f = self.open(path, OpenOptions::new().write(true).create(true))?;
        let mut done = 0;
        while done < bytes.len() {
            done += f.write_at(&bytes[done..], offset + done as u64)?;
        }
        f.close()?;
        self.cat_add_chunk(
            name,
            Chunk {
                offsets: slab.offsets.to_vec(),
                counts: slab.counts.to_vec(),
                path: path.to_string(),
                offset,
                len: bytes.len() as u64,
            },
        )
    }

    /// Reads the hyperslab `want` of version `version` of `name` (`None`: the newest) into
    /// `buf`, in C order, straight from each chunk's file (a read per contiguous run, no
    /// staging copy); the version read. Every element must lie in some chunk.
    pub fn cat_get(
        &self,
        name: &str,
        version: Option<u64>,
        want: Slab<'_>,
        buf: &mut [u8],
    ) -> FsResult<VersionView> {
        let view = self.cat_lookup(name, version)?;
        self.cat_read(&view, want, buf)?;
        Ok(view)
    }

    /// Reads the hyperslab `want` of `view` (a version [`Client::cat_lookup`] answered) into
    /// `buf`, as [`Client::cat_get`] does, for a caller that needed the version first (to
    /// size its buffer).
    pub fn cat_read(&self, view: &VersionView, want: Slab<'_>, buf: &mut [u8]) -> FsResult<()> {
        let v = &view.variable;
        let name = &v.name;
        let inval = |m: String| FsError::new(Errno::Inval, m);
        if want.offsets.len() != v.dims.len() || want.counts.len() != v.dims.len() {
            return Err(inval(format!(
                "a region of {name:?} needs {} offsets and counts (its dimensions are {:?}), not {} and {}",
                v.dims.len(),
                v.dims,
                want.offsets.len(),
                want.counts.len()
            )));
        }
        let outside = want
            .offsets
            .iter()
            .zip(want.counts)
            .zip(&v.dims)
            .any(|((o, n), d)| *n == 0 || o.checked_add(*n).is_none_or(|end| end > *d));
        if outside {
            return Err(inval(format!(
                "the region at {:?} of {:?} is empty or reaches past {name:?}'s dimensions {:?}",
                want.offsets, want.counts, v.dims
            )));
        }
        let elem = u64::from(v.elem_size);
        let need = want.elements().saturating_mul(elem);
        if buf.len() as u64 != need {
            return Err(inval(format!(
                "a buffer of {} bytes for a region of {:?} elements of {elem} bytes: give {need} bytes",
                buf.len(),
                want.counts
            )));
        }
        let mut covered = 0u64;
        for c in &view.chunks {
            let slab = Slab {
                offsets: &c.offsets,
                counts: &c.counts,
            };
            let mut file = None;
            covered += for_each_run(slab, want, elem, |run| {
                if file.is_none() {
                    file = Some(self.open_read(&c.path)?);
                }
                let f = file.as_mut().expect("opened above");
                let dst = &mut buf[run.buf_at as usize..(run.buf_at + run.len) as usize];
                let mut done = 0;
                while done < dst.len() {
                    let n = f.read_at(&mut dst[done..], c.offset + run.chunk_at + done as u64)?;
                    if n == 0 {
                        return Err(FsError::new(
                            Errno::Io,
                            format!(
                                "{}: a chunk of {name:?} ends before its {} bytes at {}",
                                c.path, c.len, c.offset
                            ),
                        ));
                    }
                    done += n;
                }
                Ok(())
            })?;
        }
        if covered < want.elements() {
            return Err(FsError::new(
                Errno::NoData,
                format!(
                    "version {} of {name:?} holds {covered} of the {} elements at {:?} of {:?}: its chunks leave the rest unwritten",
                    view.version,
                    want.elements(),
                    want.offsets,
                    want.counts
                ),
            ));
        }
        Ok(())
    }
}
