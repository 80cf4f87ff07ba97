//! The coordinator: routes each request to the service that answers it, one line per
//! request, and counts it for the metrics (its service, its time, its errno). Nothing is
//! decided here; see `services` for where each request is answered.

use crate::Node;
use crate::metrics::Service;
use crate::rpc::{Encoded, ServeClient, ServePeer};
use tessera_core::{Errno, FsError};
use tessera_proto::{Bound, ClientCall, PeerCall, PeerRequest, Request};

impl Node {
    /// Answers one request of client `client` of this node, and counts it.
    pub async fn route_client(&self, client: u64, req: Request) -> Encoded {
        self.count_request();
        let service = Service::of_client(&req);
        let written = match &req {
            Request::Attach(r) => Some(r.runs.iter().map(|run| run.bytes()).sum::<u64>()),
            _ => None,
        };
        let queried = matches!(req, Request::Query(_) | Request::QueryFile(_));
        let started = crate::clock::now();
        let answer = self.dispatch_client(client, req).await;
        let took = crate::clock::since(started);
        self.metrics.request(service, false, took, answer.errno);
        if answer.errno.is_none() {
            if let Some(bytes) = written {
                self.metrics.attached(bytes);
            }
            if queried {
                self.metrics.queried();
            }
        }
        answer
    }

    async fn dispatch_client(&self, client: u64, req: Request) -> Encoded {
        match req {
            Request::Hello(_) => Encoded::answer::<Bound>(Err(FsError::new(
                Errno::Proto,
                "hello sent twice on one connection",
            ))),
            Request::Open(r) => self.client_answer(client, r).await,
            Request::Stat(r) => self.client_answer(client, r).await,
            Request::Mkdir(r) => self.client_answer(client, r).await,
            Request::Rmdir(r) => self.client_answer(client, r).await,
            Request::Unlink(r) => self.client_answer(client, r).await,
            Request::Readdir(r) => self.client_answer(client, r).await,
            Request::Rename(r) => self.client_answer(client, r).await,
            Request::Truncate(r) => self.client_answer(client, r).await,
            Request::SetAttr(r) => self.client_answer(client, r).await,
            Request::ReadLink(r) => self.client_answer(client, r).await,
            Request::Attach(r) => self.client_answer(client, r).await,
            Request::Detach(r) => self.client_answer(client, r).await,
            Request::DetachFile(r) => self.client_answer(client, r).await,
            Request::Query(r) => self.client_answer(client, r).await,
            Request::QueryFile(r) => self.client_answer(client, r).await,
            Request::Read(r) => Encoded::data(self.read(r).await),
            Request::LogAppend(r) => self.client_answer(client, r).await,
            Request::LogSync(r) => self.client_answer(client, r).await,
            Request::LogMarkIt(r) => self.client_answer(client, r).await,
            Request::LogReadAt(r) => Encoded::data(self.log_read_at(client, r)),
            Request::ReadPfs(r) => Encoded::with_data(self.read_pfs(r).await),
            Request::Flush(r) => self.client_answer(client, r).await,
            Request::Lock(r) => self.client_answer(client, r).await,
            Request::GetLock(r) => self.client_answer(client, r).await,
            Request::ListLock(r) => self.client_answer(client, r).await,
            Request::ListUnlock(r) => self.client_answer(client, r).await,
            Request::Reserve(r) => self.client_answer(client, r).await,
            Request::Release(r) => self.client_answer(client, r).await,
            Request::Writing(r) => self.client_answer(client, r).await,
            Request::Status(r) => self.client_answer(client, r).await,
            Request::Shutdown(r) => self.client_answer(client, r).await,
            Request::TxnOpen(r) => self.client_answer(client, r).await,
            Request::TxnJoin(r) => self.client_answer(client, r).await,
            Request::TxnDecide(r) => self.client_answer(client, r).await,
            Request::CatChange(r) => self.client_answer(client, r).await,
            Request::CatLookup(r) => self.client_answer(client, r).await,
            Request::CatList(r) => self.client_answer(client, r).await,
            Request::CatWait(r) => self.client_answer(client, r).await,
            Request::AppendAt(r) => self.client_answer(client, r).await,
            Request::Xattr(r) => self.client_answer(client, r).await,
            Request::Symlink(r) => self.client_answer(client, r).await,
            Request::Link(r) => self.client_answer(client, r).await,
            Request::Locate(r) => self.client_answer(client, r).await,
            Request::ForwardPing(r) => self.client_answer(client, r).await,
            Request::MigratePlan(r) => self.client_answer(client, r).await,
            Request::AttachIf(r) => self.client_answer(client, r).await,
            Request::TxnEnroll(r) => self.client_answer(client, r).await,
            Request::TxnReserve(r) => self.client_answer(client, r).await,
            Request::StatLeased(r) => self.client_answer(client, r).await,
            Request::Nop(_) => Encoded::answer::<()>(Ok(())),
            Request::Goodbye(_) => {
                self.clients.said_goodbye(client);
                Encoded::answer::<()>(Ok(()))
            }
            Request::Staged(r) => {
                self.metrics.staged(r.direction, r.bytes);
                Encoded::answer::<()>(Ok(()))
            }
        }
    }

    /// Answers one request of a peer (or of the `tessera` command), and counts it.
    pub async fn route_peer(&self, req: PeerRequest) -> Encoded {
        self.count_request();
        let service = Service::of_peer(&req);
        let started = crate::clock::now();
        let answer = self.dispatch_peer(req).await;
        let took = crate::clock::since(started);
        self.metrics.request(service, true, took, answer.errno);
        answer
    }

    async fn dispatch_peer(&self, req: PeerRequest) -> Encoded {
        match req {
            PeerRequest::Ping(r) => self.peer_answer(r).await,
            PeerRequest::DentryGet(r) => self.peer_answer(r).await,
            PeerRequest::DentryCreate(r) => self.peer_answer(r).await,
            PeerRequest::DentryRemove(r) => self.peer_answer(r).await,
            PeerRequest::DentryPut(r) => self.peer_answer(r).await,
            PeerRequest::ListChildren(r) => self.peer_answer(r).await,
            PeerRequest::SealDir(r) => self.peer_answer(r).await,
            PeerRequest::HasChildren(r) => self.peer_answer(r).await,
            PeerRequest::InodeGet(r) => self.peer_answer(r).await,
            PeerRequest::InodeSetSize(r) => self.peer_answer(r).await,
            PeerRequest::InodeRemove(r) => self.peer_answer(r).await,
            PeerRequest::InodeSetAttr(r) => self.peer_answer(r).await,
            PeerRequest::OwnAttach(r) => self.peer_answer(r).await,
            PeerRequest::OwnDetach(r) => self.peer_answer(r).await,
            PeerRequest::OwnFetchStripe(r) => self.peer_answer(r).await,
            PeerRequest::Invalidate(r) => self.peer_answer(r).await,
            PeerRequest::OwnQueryFile(r) => self.peer_answer(r).await,
            PeerRequest::OwnDetachFile(r) => self.peer_answer(r).await,
            PeerRequest::OwnTruncate(r) => self.peer_answer(r).await,
            PeerRequest::DropFile(r) => self.peer_answer(r).await,
            PeerRequest::DropFiles(r) => self.peer_answer(r).await,
            PeerRequest::ReadLog(r) => Encoded::data(self.read_log_for_peer(r).await),
            PeerRequest::FlushFile(r) => self.peer_answer(r).await,
            PeerRequest::FlushPart(r) => self.peer_answer(r).await,
            PeerRequest::TableLock(r) => self.peer_answer(r).await,
            PeerRequest::TableGetLock(r) => self.peer_answer(r).await,
            PeerRequest::ReleaseLocks(r) => self.peer_answer(r).await,
            PeerRequest::TableListLock(r) => self.peer_answer(r).await,
            PeerRequest::TableListUnlock(r) => self.peer_answer(r).await,
            PeerRequest::RenewLease(r) => self.peer_answer(r).await,
            PeerRequest::Fence(r) => self.peer_answer(r).await,
            PeerRequest::Status(r) => self.peer_answer(r).await,
            PeerRequest::Shutdown(r) => self.peer_answer(r).await,
            PeerRequest::TxnMember(r) => self.peer_answer(r).await,
            PeerRequest::TxnHomeDecide(r) => self.peer_answer(r).await,
            PeerRequest::TxnPrepare(r) => self.peer_answer(r).await,
            PeerRequest::TxnComplete(r) => self.peer_answer(r).await,
            PeerRequest::TxnStatus(r) => self.peer_answer(r).await,
            PeerRequest::InodeGetAs(r) => self.peer_answer(r).await,
            PeerRequest::TxnMembers(r) => self.peer_answer(r).await,
            PeerRequest::CatShardChange(r) => self.peer_answer(r).await,
            PeerRequest::CatShardLookup(r) => self.peer_answer(r).await,
            PeerRequest::CatShardList(r) => self.peer_answer(r).await,
            PeerRequest::CatShardWait(r) => self.peer_answer(r).await,
            PeerRequest::InodeAppend(r) => self.peer_answer(r).await,
            PeerRequest::TxnTruncate(r) => self.peer_answer(r).await,
            PeerRequest::DentryMoveOut(r) => self.peer_answer(r).await,
            PeerRequest::DentryMoveIn(r) => self.peer_answer(r).await,
            PeerRequest::InodeXattr(r) => self.peer_answer(r).await,
            PeerRequest::InodeLink(r) => self.peer_answer(r).await,
            PeerRequest::InodeUnlink(r) => self.peer_answer(r).await,
            PeerRequest::DentryLink(r) => self.peer_answer(r).await,
            PeerRequest::LocateNames(r) => self.peer_answer(r).await,
            PeerRequest::LocateInodes(r) => self.peer_answer(r).await,
            PeerRequest::LocateRuns(r) => self.peer_answer(r).await,
            PeerRequest::OwnStripeAt(r) => self.peer_answer(r).await,
            PeerRequest::OwnAttachIf(r) => self.peer_answer(r).await,
            PeerRequest::ReleaseLogs(r) => self.peer_answer(r).await,
            PeerRequest::TxnEnrollNode(r) => self.peer_answer(r).await,
            PeerRequest::ChangeNames(r) => self.peer_answer(r).await,
            PeerRequest::RemoveName(r) => self.peer_answer(r).await,
            PeerRequest::NameStep(r) => self.peer_answer(r).await,
            PeerRequest::ForgetNameSteps(r) => self.peer_answer(r).await,
            PeerRequest::NamesOfNode(r) => self.peer_answer(r).await,
            PeerRequest::CheckNames(r) => self.peer_answer(r).await,
            PeerRequest::TxnMovedIn(r) => self.peer_answer(r).await,
            PeerRequest::FindEntries(r) => self.peer_answer(r).await,
            PeerRequest::InodeAttrs(r) => self.peer_answer(r).await,
            PeerRequest::LeaseAttr(r) => self.peer_answer(r).await,
            PeerRequest::ForgetAttrs(r) => self.peer_answer(r).await,
        }
    }

    async fn client_answer<R: ClientCall>(&self, client: u64, r: R) -> Encoded
    where
        Node: ServeClient<R>,
    {
        Encoded::answer(self.serve_client(client, r).await)
    }

    async fn peer_answer<R: PeerCall>(&self, r: R) -> Encoded
    where
        Node: ServePeer<R>,
    {
        Encoded::answer(self.serve_peer(r).await)
    }
}
