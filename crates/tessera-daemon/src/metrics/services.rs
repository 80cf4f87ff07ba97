//! Which service answers each request: the `service` label of the request latency
//! histogram. Every request kind is named here (no catch-all), so a new kind of request
//! must be given its service before it builds.

use tessera_proto::{PeerRequest, Request};

/// A service of the daemon, as metrics label it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Service {
    /// Names and attributes: open, stat, mkdir, rename, links, extended attributes.
    Namespace,
    /// Who holds which bytes: attach, detach, query.
    Ownership,
    /// File bytes: reads of logs (this node's or other nodes') and of the PFS copy.
    Read,
    /// Logs the daemon writes or reserves space for on a client's behalf.
    Log,
    /// Copies into the PFS directory.
    Flush,
    /// Byte-range and list locks.
    Locks,
    /// Transactions (D2T).
    Txn,
    /// The catalogue of variables.
    Catalogue,
    /// Locality answers and migration (FusionFS).
    Locality,
    /// Hello, status, shutdown and the like.
    Admin,
}

impl Service {
    /// Every service, in the order of [`Service::index`].
    pub const ALL: [Service; 10] = [
        Service::Namespace,
        Service::Ownership,
        Service::Read,
        Service::Log,
        Service::Flush,
        Service::Locks,
        Service::Txn,
        Service::Catalogue,
        Service::Locality,
        Service::Admin,
    ];

    /// The service's place in [`Service::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Service::Namespace => "namespace",
            Service::Ownership => "ownership",
            Service::Read => "read",
            Service::Log => "log",
            Service::Flush => "flush",
            Service::Locks => "locks",
            Service::Txn => "txn",
            Service::Catalogue => "catalogue",
            Service::Locality => "locality",
            Service::Admin => "admin",
        }
    }

    /// The service a client's request goes to.
    pub fn of_client(req: &Request) -> Service {
        use Request as R;
        match req {
            R::Open(_)
            | R::Stat(_)
            | R::StatLeased(_)
            | R::Mkdir(_)
            | R::Rmdir(_)
            | R::Unlink(_)
            | R::Readdir(_)
            | R::Rename(_)
            | R::Truncate(_)
            | R::SetAttr(_)
            | R::ReadLink(_)
            | R::Xattr(_)
            | R::Symlink(_)
            | R::Link(_)
            | R::AppendAt(_) => Service::Namespace,
            R::Attach(_)
            | R::AttachIf(_)
            | R::Detach(_)
            | R::DetachFile(_)
            | R::Query(_)
            | R::QueryFile(_) => Service::Ownership,
            R::Read(_) | R::LogReadAt(_) | R::ReadPfs(_) => Service::Read,
            R::LogAppend(_)
            | R::LogSync(_)
            | R::LogMarkIt(_)
            | R::Reserve(_)
            | R::Release(_)
            | R::Writing(_) => Service::Log,
            R::Flush(_) => Service::Flush,
            R::Lock(_) | R::GetLock(_) | R::ListLock(_) | R::ListUnlock(_) => Service::Locks,
            R::TxnOpen(_)
            | R::TxnJoin(_)
            | R::TxnDecide(_)
            | R::TxnEnroll(_)
            | R::TxnReserve(_) => Service::Txn,
            R::CatChange(_) | R::CatLookup(_) | R::CatList(_) | R::CatWait(_) => Service::Catalogue,
            R::Locate(_) | R::MigratePlan(_) | R::ForwardPing(_) => Service::Locality,
            R::Hello(_)
            | R::Status(_)
            | R::Shutdown(_)
            | R::Nop(_)
            | R::Goodbye(_)
            | R::Staged(_) => Service::Admin,
        }
    }

    /// The service a peer's request goes to.
    pub fn of_peer(req: &PeerRequest) -> Service {
        use PeerRequest as P;
        match req {
            P::DentryGet(_)
            | P::DentryCreate(_)
            | P::DentryRemove(_)
            | P::DentryPut(_)
            | P::DentryMoveOut(_)
            | P::DentryMoveIn(_)
            | P::DentryLink(_)
            | P::ListChildren(_)
            | P::SealDir(_)
            | P::HasChildren(_)
            | P::InodeGet(_)
            | P::InodeGetAs(_)
            | P::InodeSetSize(_)
            | P::InodeRemove(_)
            | P::InodeSetAttr(_)
            | P::InodeAppend(_)
            | P::InodeXattr(_)
            | P::InodeLink(_)
            | P::InodeUnlink(_)
            | P::InodeAttrs(_)
            | P::ChangeNames(_)
            | P::RemoveName(_)
            | P::NameStep(_)
            | P::ForgetNameSteps(_)
            | P::NamesOfNode(_)
            | P::CheckNames(_)
            | P::FindEntries(_)
            | P::LeaseAttr(_)
            | P::ForgetAttrs(_) => Service::Namespace,
            P::OwnAttach(_)
            | P::OwnAttachIf(_)
            | P::OwnDetach(_)
            | P::OwnDetachFile(_)
            | P::OwnFetchStripe(_)
            | P::OwnQueryFile(_)
            | P::OwnTruncate(_)
            | P::OwnStripeAt(_)
            | P::Invalidate(_)
            | P::DropFile(_)
            | P::DropFiles(_)
            | P::ReleaseLogs(_) => Service::Ownership,
            P::ReadLog(_) => Service::Read,
            P::FlushFile(_) | P::FlushPart(_) => Service::Flush,
            P::TableLock(_)
            | P::TableGetLock(_)
            | P::TableListLock(_)
            | P::TableListUnlock(_)
            | P::ReleaseLocks(_)
            | P::RenewLease(_)
            | P::Fence(_) => Service::Locks,
            P::TxnMember(_)
            | P::TxnHomeDecide(_)
            | P::TxnPrepare(_)
            | P::TxnComplete(_)
            | P::TxnStatus(_)
            | P::TxnMembers(_)
            | P::TxnTruncate(_)
            | P::TxnEnrollNode(_)
            | P::TxnMovedIn(_) => Service::Txn,
            P::CatShardChange(_)
            | P::CatShardLookup(_)
            | P::CatShardList(_)
            | P::CatShardWait(_) => Service::Catalogue,
            P::LocateNames(_) | P::LocateInodes(_) | P::LocateRuns(_) => Service::Locality,
            P::Ping(_) | P::Status(_) | P::Shutdown(_) => Service::Admin,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_service_sits_at_its_index_under_a_distinct_label() {
        for (i, s) in Service::ALL.iter().enumerate() {
            assert_eq!(s.index(), i, "{s:?}");
        }
        let labels: std::collections::HashSet<_> = Service::ALL.iter().map(|s| s.label()).collect();
        assert_eq!(labels.len(), Service::ALL.len());
    }
}
