//! Burst-buffer space: the grant a process reserves ahead of its writes, and its return.

use super::*;
use tessera_core::{Errno, FsResult};
use tessera_proto::{Release, Reserve};

impl Inner {
    /// Makes sure `bytes` more may be appended to the burst buffer.
    pub fn reserve(&mut self, bytes: u64) -> FsResult<()> {
        if self.cfg.bb_capacity == 0 || self.grant >= bytes {
            self.grant = self.grant.saturating_sub(bytes);
            return Ok(());
        }
        let need = bytes - self.grant;
        let got = match self.call(Reserve {
            bytes: need.max(GRANT_CHUNK),
        }) {
            Err(e) if e.errno == Errno::NoSpace => self.call(Reserve { bytes: need })?,
            other => other?,
        };
        self.grant = self.grant + got - bytes;
        Ok(())
    }

    /// Makes the grant cover `bytes` more without using it (see [`Client::preallocate`]).
    pub fn preallocate(&mut self, bytes: u64) -> FsResult<()> {
        if self.cfg.bb_capacity == 0 || self.grant >= bytes {
            return Ok(());
        }
        let got = self.call(Reserve {
            bytes: bytes - self.grant,
        })?;
        self.grant += got;
        Ok(())
    }

    /// Returns unused reserved space (best effort).
    pub(super) fn release_grant(&mut self) {
        if self.grant > 0
            && let Some(c) = self.conn.as_mut()
        {
            let _ = c.call(Release { bytes: self.grant });
            self.grant = 0;
        }
    }
}

/// The burst-buffer space of a process's node, as statfs reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Space {
    /// The configured capacity, or the device's size when none is set.
    pub total: u64,
    /// What is left of it: less what the logs hold and what live clients reserved.
    pub free: u64,
}

impl Client {
    /// The space of this process's node's burst buffer (statfs of a Tessera path: the
    /// interposer's and the mount's).
    pub fn space(&self) -> FsResult<Space> {
        let s = self.status()?;
        Ok(if s.bb_capacity > 0 {
            let taken = s.bb_used + s.bb_reserved;
            Space {
                total: s.bb_capacity,
                free: s.bb_capacity.saturating_sub(taken),
            }
        } else {
            Space {
                total: s.bb_device_total,
                free: s.bb_device_free.saturating_sub(s.bb_reserved),
            }
        })
    }
}
