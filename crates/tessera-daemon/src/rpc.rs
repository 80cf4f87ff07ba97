//! Typed calls inside a daemon: how a service answers a request type, and how a service calls
//! the shard that holds the data (this daemon's own shard directly, another's over TCP).
//!
//! Each request type names its reply type (`tessera_proto::calls`); a service answers it by
//! implementing [`ServeClient`] or [`ServePeer`] for that type, so a handler returning another
//! request's reply does not compile, and neither does a caller expecting one.

use crate::Node;
use bytes::Bytes;
use serde::Serialize;
use std::future::Future;
use std::pin::Pin;
use tessera_core::{FsError, FsResult};
use tessera_proto::{ClientCall, Data, PeerCall, encode_answer};

/// A service's answer to one client request type.
pub trait ServeClient<R: ClientCall> {
    fn serve_client(&self, client: u64, req: R) -> impl Future<Output = FsResult<R::Reply>> + Send;
}

/// A shard's answer to one peer request type.
pub trait ServePeer<R: PeerCall> {
    fn serve_peer(&self, req: R) -> impl Future<Output = FsResult<R::Reply>> + Send;
}

/// An encoded answer and the data that follows it in the frame.
pub struct Encoded {
    pub msg: Vec<u8>,
    pub data: Vec<Bytes>,
    /// The error the answer carries, if it is one (for the metrics).
    pub errno: Option<tessera_core::Errno>,
}

impl Encoded {
    /// A reply (or error) without data.
    pub fn answer<T: Serialize>(answer: FsResult<T>) -> Self {
        Encoded {
            errno: answer.as_ref().err().map(|e| e.errno),
            msg: encode_answer(&answer),
            data: Vec::new(),
        }
    }

    /// Bytes read, announced by a [`Data`] reply and sent after it.
    pub fn data(read: FsResult<Vec<Bytes>>) -> Self {
        match read {
            Ok(data) => {
                let len = data.iter().map(|d| d.len() as u64).sum();
                Encoded {
                    msg: encode_answer(&Ok(Data { len })),
                    data,
                    errno: None,
                }
            }
            Err(e) => Encoded::answer::<Data>(Err(e)),
        }
    }

    /// A reply and the data that follows it.
    pub fn with_data<T: Serialize>(read: FsResult<(T, Vec<Bytes>)>) -> Self {
        match read {
            Ok((reply, data)) => Encoded {
                msg: encode_answer(&Ok(reply)),
                data,
                errno: None,
            },
            Err(e) => Encoded::error(e),
        }
    }

    pub fn frame_len(&self) -> usize {
        self.msg.len() + self.data.iter().map(|d| d.len()).sum::<usize>()
    }

    /// The frame body: the message, then the data.
    pub fn parts(&self) -> Vec<&[u8]> {
        std::iter::once(&self.msg[..])
            .chain(self.data.iter().map(|d| &d[..]))
            .collect()
    }

    /// The answer of a failure (the reply type is irrelevant to an error's bytes).
    pub fn error(e: FsError) -> Self {
        Encoded::answer::<()>(Err(e))
    }
}

impl Node {
    /// Calls a shard: directly if it is this daemon, over the peer links otherwise.
    pub async fn call<R>(&self, node: u32, req: R) -> FsResult<R::Reply>
    where
        R: PeerCall,
        Node: ServePeer<R>,
    {
        if node == self.id {
            self.count_request();
            // Boxed: a handler calls back into other shards, this one included.
            let local: Pin<Box<dyn Future<Output = FsResult<R::Reply>> + Send + '_>> =
                Box::pin(self.serve_peer(req));
            local.await
        } else {
            let frame = self.links.exchange(node, req.into()).await?;
            crate::transport::peer::reply_of::<R>(node, &frame)
        }
    }

    /// Calls several shards concurrently; fails with the first error.
    pub async fn call_all<R>(
        &self,
        reqs: impl IntoIterator<Item = (u32, R)>,
    ) -> FsResult<Vec<R::Reply>>
    where
        R: PeerCall,
        Node: ServePeer<R>,
    {
        futures::future::try_join_all(reqs.into_iter().map(|(n, r)| self.call(n, r))).await
    }

    /// The same request for every node of the instance.
    pub fn every_node<R>(&self, req: impl Fn() -> R) -> Vec<(u32, R)> {
        (0..self.cfg.nodes).map(|n| (n, req())).collect()
    }
}
