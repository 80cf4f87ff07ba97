//! The metrics endpoint: `GET /metrics` over HTTP/1.1 (hyper), on the address and port
//! instance.toml names (`metrics_addr`, `metrics_port`); nothing listens unless the port is
//! set.

use crate::Node;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::InstanceConfig;
use tokio::net::TcpListener;

/// The content type of the OpenMetrics text, which Prometheus scrapes.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How long a connection may take to send its request's headers: a client that stalls is
/// dropped instead of holding a task.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Where node `id` serves its metrics, if the instance asks for them: port 0 takes any free
/// port; on one machine (a loopback `listen_host`) node K takes `metrics_port + K`, so the
/// nodes of one host do not collide, and across hosts every node takes `metrics_port`.
pub fn address_for(cfg: &InstanceConfig, id: u32) -> FsResult<Option<SocketAddr>> {
    let Some(port) = cfg.metrics_port else {
        return Ok(None);
    };
    let ip: IpAddr = cfg.metrics_addr.parse().map_err(|_| {
        FsError::new(
            Errno::Inval,
            format!(
                "metrics_addr = {:?} in instance.toml is not an IP address: give one, such as 127.0.0.1 or 0.0.0.0",
                cfg.metrics_addr
            ),
        )
    })?;
    let one_machine = cfg
        .listen_host
        .parse::<IpAddr>()
        .is_ok_and(|ip| ip.is_loopback());
    let port = match (port, one_machine) {
        (0, _) | (_, false) => port,
        (p, true) => u16::try_from(u32::from(p) + id).map_err(|_| {
            FsError::new(
                Errno::Inval,
                format!(
                    "metrics_port = {p} in instance.toml: node {id} would serve on port {}, past 65535; choose a lower port",
                    u32::from(p) + id
                ),
            )
        })?,
    };
    Ok(Some(SocketAddr::new(ip, port)))
}

/// Binds the endpoint of node `id`, if the instance asks for one.
pub async fn bind(cfg: &InstanceConfig, id: u32) -> FsResult<Option<TcpListener>> {
    let Some(at) = address_for(cfg, id)? else {
        return Ok(None);
    };
    let listener = TcpListener::bind(at).await.map_err(|e| {
        FsError::io(
            format!("serving metrics on {at} (metrics_addr, metrics_port in instance.toml)"),
            &e,
        )
    })?;
    Ok(Some(listener))
}

/// Answers scrapes until the daemon ends.
pub async fn serve(node: Arc<Node>, listener: TcpListener) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("accepting a metrics connection failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let node = node.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let node = node.clone();
                async move { Ok::<_, Infallible>(answer(&node, &req)) }
            });
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                tracing::debug!("metrics connection: {e}");
            }
        });
    }
}

fn answer(node: &Node, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, kind: &str, body: String| {
        Response::builder()
            .status(status)
            .header(hyper::header::CONTENT_TYPE, kind)
            .body(Full::new(Bytes::from(body)))
            .expect("a response of a valid status and header")
    };
    let text = "text/plain; charset=utf-8";
    match (req.method(), req.uri().path()) {
        (&Method::GET | &Method::HEAD, "/metrics") => {
            reply(StatusCode::OK, CONTENT_TYPE, node.metrics_text())
        }
        (&Method::GET | &Method::HEAD, path) => reply(
            StatusCode::NOT_FOUND,
            text,
            format!("{path}: not found; this Tessera daemon serves its metrics at /metrics\n"),
        ),
        (method, _) => reply(
            StatusCode::METHOD_NOT_ALLOWED,
            text,
            format!("{method}: not allowed; scrape the metrics with GET /metrics\n"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn cfg(listen: &str, port: Option<u16>) -> InstanceConfig {
        let mut c = InstanceConfig::new(4, PathBuf::from("/p"), PathBuf::from("/b"));
        c.listen_host = listen.to_string();
        c.metrics_port = port;
        c
    }

    #[test]
    fn nodes_of_one_machine_take_ports_in_turn_and_hosts_share_one() {
        assert_eq!(address_for(&cfg("127.0.0.1", None), 2).unwrap(), None);
        let at = |listen, port, id| address_for(&cfg(listen, port), id).unwrap().unwrap();
        assert_eq!(at("127.0.0.1", Some(9400), 0).port(), 9400);
        assert_eq!(at("127.0.0.1", Some(9400), 3).port(), 9403);
        assert_eq!(at("10.1.0.0/16", Some(9400), 3).port(), 9400);
        assert_eq!(at("127.0.0.1", Some(0), 3).port(), 0);
        assert_eq!(at("127.0.0.1", Some(9400), 3).ip().to_string(), "127.0.0.1");
    }

    #[test]
    fn a_bad_address_or_a_port_past_the_range_is_refused_by_name() {
        let mut c = cfg("127.0.0.1", Some(9400));
        c.metrics_addr = "localhost:80".into();
        let e = address_for(&c, 0).unwrap_err();
        assert_eq!(e.errno, Errno::Inval);
        assert!(e.message.contains("metrics_addr"), "{e}");
        let e = address_for(&cfg("127.0.0.1", Some(65535)), 3).unwrap_err();
        assert!(e.message.contains("metrics_port = 65535"), "{e}");
    }
}
