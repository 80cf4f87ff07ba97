//! Starting a daemon: load its state, bind its sockets, register it in the host table, and
//! serve until it is told to stop.

use crate::node::Node;
use crate::transport::{client as server, listen, peer};
use crate::{logs, pfs, state, store};
use std::sync::Arc;
use tessera_core::{Errno, FsError, FsResult};
use tessera_proto::InstanceLayout;

/// Removes the flush temporaries a crash left in the PFS directory (their names were recorded
/// before they were created) and forgets them.
async fn remove_flush_temps(node: &Node, temps: &[String]) -> FsResult<()> {
    if temps.is_empty() {
        return Ok(());
    }
    for t in temps {
        match node.pfs.remove_temp(t) {
            Ok(()) => tracing::info!(
                "removed the flush temporary {} a crash left",
                node.pfs.show(t)
            ),
            Err(e) => tracing::warn!("could not remove the flush temporary {t}: {e}"),
        }
    }
    let forget = temps
        .iter()
        .cloned()
        .map(store::DbOp::DelFlushTemp)
        .collect();
    node.store.submit(forget).durable().await
}

/// Runs daemon `node` of the instance in `layout` until it is told to stop.
pub fn run(layout: InstanceLayout, node: u32) -> FsResult<()> {
    // Read buffers of several MiB are allocated per request; above glibc's default mmap
    // threshold each would map (and fault in, and zero) fresh pages. Keeping them in the heap
    // lets freed buffers be reused: page faults were a quarter of the read path's CPU.
    // SAFETY: mallopt only tunes the allocator; called before any thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
    raise_descriptor_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("tessera-daemon")
        .build()
        .map_err(|e| FsError::io("starting the runtime", &e))?;
    rt.block_on(serve(layout, node))
}

/// Raises the daemon's soft limit on open descriptors to its hard limit, as servers do: a
/// daemon holds a connection per process of its node and a view of up to 256 logs (three
/// descriptors each), which the common soft limit of 1024 leaves little room for. A limit
/// that cannot be raised is kept (the views then stay within half of it, see `logs.rs`).
fn raise_descriptor_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_some() && limit.current != limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!("could not raise the descriptor limit to its hard limit: {e}");
        }
    }
}

/// How a node reaches the others, and what its failpoints do: a daemon's TCP connections
/// and environment, or an in-process cluster's channels and harness.
pub(crate) struct Wiring {
    pub links: Box<dyn crate::transport::links::PeerLinks>,
    pub bulk: Box<dyn crate::transport::bulk::BulkPath>,
    pub failpoints: crate::failpoints::Failpoints,
}

/// Opens the state of node `id` on its burst buffer and builds the node (no socket and no
/// task yet); also what the state held that [`recover`] and [`spawn_tasks`] take up.
pub(crate) fn open_node(
    layout: &InstanceLayout,
    cfg: tessera_proto::InstanceConfig,
    id: u32,
    secret: Vec<u8>,
    wiring: Wiring,
) -> FsResult<(Arc<Node>, store::Loaded)> {
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let bb = cfg.bb_dir(id);
    // The root may be shared (/dev/shm): created if missing, left as it is. The node's own
    // directory and everything below it are private, or the daemon does not start.
    std::fs::create_dir_all(&cfg.bb_root)
        .map_err(|e| FsError::io(format!("creating {}", cfg.bb_root.display()), &e))?;
    tessera_logstore::private::private_dir(&bb)?;
    tessera_logstore::private::private_dir(&bb.join("logs"))?;
    let (store, mut loaded) = store::Store::open(
        &bb,
        store::StoreOptions {
            durability: cfg.state_durability,
            checkpoint_idle: std::time::Duration::from_millis(cfg.state_checkpoint_idle_ms),
            node: id,
        },
    )?;
    for problem in &loaded.wal_problems {
        tracing::warn!("{problem}");
    }
    // State from an earlier run means this daemon restarted: copies of its stripes may exist.
    let restarted = loaded.next_client > 1 || !loaded.owners.is_empty();
    let pfs = pfs::Pfs::open(&cfg.pfs_dir)?;
    let attrs = crate::services::attr_cache::AttrCache::new(id, cfg.attr_lease_ms, restarted);
    store.observe(attrs.observer());
    let Wiring {
        links,
        bulk,
        failpoints,
    } = wiring;
    let node = Arc::new(Node {
        id,
        shards: state::shards::Shards::new(
            tessera_core::namespace::Namespace::new(
                id,
                loaded.next_ino,
                std::mem::take(&mut loaded.dentries),
                std::mem::take(&mut loaded.inodes),
            )
            .with_xattrs(std::mem::take(&mut loaded.xattrs))
            .with_xattr_limits(cfg.xattr_limits()),
            tessera_core::ownership::Ownership::load(&loaded.owners),
            state::cache::Callbacks::new(restarted),
        ),
        logs: logs::Logs::new(id, &cfg),
        links,
        failpoints,
        bulk,
        client_ids: crate::client_ids::ClientIds::resume(loaded.next_client),
        cfg,
        layout: layout.clone(),
        secret,
        store,
        life: crate::lifecycle::Lifecycle::default(),
        uid,
        gid,
        flushed: Default::default(),
        releases: Default::default(),
        flush_locks: Default::default(),
        locks: crate::services::locks::LockService::default(),
        clients: state::clients::Clients::default(),
        pfs: Arc::new(pfs),
        stripe_cache: Default::default(),
        txns: crate::services::txn::Txns::new(
            tessera_core::txn_pending::PendingOwnership::load(
                &loaded.pending_runs,
                &loaded.pending_sizes,
                &loaded.pending_cuts,
                &loaded.prepared,
            ),
            tessera_core::txn_entries::PendingEntries::load(
                std::mem::take(&mut loaded.pending_dentries),
                std::mem::take(&mut loaded.pending_moves),
            ),
            loaded.next_txn,
        ),
        catalogue: crate::services::catalogue_shard::CatalogueShard::new(
            tessera_core::catalogue::Catalogue::load(
                std::mem::take(&mut loaded.cat_versions),
                &loaded.cat_next,
                std::mem::take(&mut loaded.cat_pending),
            ),
        ),
        client_logs: Default::default(),
        metrics: Default::default(),
        names: state::names::NameIntents::load(
            std::mem::take(&mut loaded.name_intents),
            std::mem::take(&mut loaded.name_steps),
        ),
        drops: state::drops::FilesToDrop::load(std::mem::take(&mut loaded.files_to_drop)),
        seals: Default::default(),
        attrs: attrs.clone(),
    });
    Ok((node, loaded))
}

/// What a node does with its state before it serves: its transactions' decision records
/// taken up again (the work returned, for [`spawn_tasks`]), the flush temporaries a crash
/// left removed, the clients it had expected back.
pub(crate) async fn recover(
    node: &Arc<Node>,
    loaded: &store::Loaded,
) -> FsResult<Vec<(u64, Vec<tessera_core::txn_home::Action>)>> {
    let home_work = node.recover_homes(&loaded.home_txns);
    remove_flush_temps(node, &loaded.flush_temps).await?;
    node.clients.expect_back(&loaded.clients);
    for (client, ino, pos) in &loaded.published {
        node.clients.note_published(*client, *ino, *pos);
    }
    Ok(home_work)
}

/// Starts a node's background tasks (leases, homes, resolution, releases, names, drops)
/// and the drives of the transactions it is home of; their handles, to stop them.
pub(crate) fn spawn_tasks(
    node: &Arc<Node>,
    home_work: Vec<(u64, Vec<tessera_core::txn_home::Action>)>,
    names_unchecked: bool,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = vec![
        tokio::spawn(node.clone().watch_absent_clients()),
        tokio::spawn(node.clone().keep_leases()),
        tokio::spawn(node.clone().keep_homes()),
        tokio::spawn(node.clone().resolve_pending()),
        tokio::spawn(node.clone().tell_leaves()),
        tokio::spawn(node.clone().release_migrated()),
        tokio::spawn(node.clone().keep_names()),
        tokio::spawn(node.clone().keep_dropping()),
        tokio::spawn(node.clone().keep_telling()),
    ];
    if names_unchecked {
        tasks.push(tokio::spawn(node.clone().check_names_once()));
    }
    for (txn, actions) in home_work {
        let home = node.clone();
        tasks.push(tokio::spawn(async move { home.drive(txn, actions).await }));
    }
    tasks
}

async fn serve(layout: InstanceLayout, id: u32) -> FsResult<()> {
    let cfg = layout.load_config()?;
    crate::check_security(&cfg)?;
    if id >= cfg.nodes {
        return Err(FsError::new(
            Errno::Inval,
            format!(
                "node {id} does not exist: the instance has nodes 0..{}",
                cfg.nodes
            ),
        ));
    }
    let secret = layout.load_secret()?;
    // Before any state is touched: a host that cannot take part fails at once.
    let listen_ip = listen::resolve(&cfg.listen_host)?;
    let metrics = crate::metrics::bind(&cfg, id).await?;
    let loading = crate::clock::now();
    let wiring = Wiring {
        links: Box::new(peer::Peers::new(layout.clone(), secret.clone(), id, &cfg)),
        bulk: Box::new(crate::transport::bulk::TcpBulk::new(peer::Peers::new(
            layout.clone(),
            secret.clone(),
            id,
            &cfg,
        ))),
        failpoints: crate::failpoints::Failpoints::from_env(),
    };
    let (node, loaded) = open_node(&layout, cfg, id, secret, wiring)?;
    let home_work = recover(&node, &loaded).await?;
    let state_ms = crate::clock::since(loading).as_millis() as u64;
    let (files, extents) = node.shards.ownership(|own| own.stats());
    tracing::info!(
        node = id,
        inodes = node.shards.namespace(|ns| ns.inode_count()),
        files,
        ownership_entries = extents,
        state_ms,
        "state loaded"
    );

    let socket = node.cfg.socket_path(id);
    let unix = server::bind(&socket).await?;
    let tcp = tokio::net::TcpListener::bind((listen_ip, 0))
        .await
        .map_err(|e| FsError::io(format!("listening on {listen_ip}"), &e))?;
    let addr = tcp
        .local_addr()
        .map_err(|e| FsError::io("local address", &e))?;
    tokio::spawn(peer::serve(node.clone(), tcp));
    tokio::spawn(server::serve(node.clone(), unix));
    if let Some(listener) = metrics {
        if let Ok(at) = listener.local_addr() {
            node.metrics.serving_at(at);
        }
        tokio::spawn(crate::metrics::serve(node.clone(), listener));
    }
    spawn_tasks(&node, home_work, loaded.names_unchecked);
    // Registered last: a node in the host table serves both its clients and its peers.
    let host = tessera_proto::hosts::this_host();
    // 63 bits: TOML integers are signed.
    let incarnation = rand::random::<u64>() >> 1;
    layout.update_hosts(|t| {
        t.register(tessera_proto::HostEntry {
            node: id,
            host: host.clone(),
            addr: addr.to_string(),
            pid: std::process::id(),
            incarnation,
        })
    })?;
    tracing::info!(node = id, %host, socket = %socket.display(), peers = %addr, "ready");
    // Every log on the node is checked so that damage is reported now, not when a reader
    // meets it; in the background, as it reads every log (0.8 s for 3,300 writers' logs),
    // and a reader that meets damage first is refused by its own check anyway.
    let checking = node.clone();
    tokio::task::spawn_blocking(move || {
        let started = crate::clock::now();
        let problems = checking.logs.scan();
        for problem in &problems {
            tracing::warn!("log check: {problem}");
        }
        tracing::info!(
            ms = crate::clock::since(started).as_millis() as u64,
            problems = problems.len(),
            "every log on this node checked"
        );
        // Logs whose files all went while their writer ended, or before this daemon stopped
        // part way through deleting them, go now.
        for log in checking.logs.log_ids() {
            if let Err(e) = checking
                .logs
                .delete_if_done(log, &|l, txn| checking.log_in_use(l, txn))
            {
                tracing::warn!(log, "keeping a log: {e}");
            }
        }
    });

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| FsError::io("installing SIGTERM handler", &e))?;
    tokio::select! {
        () = node.life.asked_to_stop() => tracing::info!("shutdown requested"),
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted"),
    }
    node.life.stop();
    // The state is written and its files closed before the node leaves the table: whoever
    // sees it gone may start its successor on the same burst buffer.
    let store_node = node.clone();
    let _ = tokio::task::spawn_blocking(move || store_node.store.close()).await;
    if let Err(e) = layout.update_hosts(|t| t.unregister(id, incarnation)) {
        tracing::warn!("could not remove node {id} from the host table: {e}");
    }
    let _ = std::fs::remove_file(&socket);
    Ok(())
}
