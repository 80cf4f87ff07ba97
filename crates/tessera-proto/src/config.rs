//! The instance: its configuration file and the layout of its directory.
//!
//! An instance is one running Tessera: N daemons, their burst-buffer directories, the PFS
//! directory they flush to, and a secret. It is described by `instance.toml` in the instance
//! directory, which every daemon and client reads:
//!
//! ```text
//! <instance>/instance.toml     this configuration
//! <instance>/secret            32 random bytes (hex), mode 0600: authenticates daemons
//! <instance>/hosts.toml        the host table: node, host name, address, pid of each daemon
//! <instance>/hosts.lock        taken (flock) by a daemon updating the host table
//! <instance>/logs/node-K.log   daemon logs
//! <bb_root>/node-K/            burst buffer of node K (mode 0700): meta.redb (state),
//!                              logs/<ino>/, and daemon.sock, the socket of the node's clients
//! ```
//!
//! On a cluster the instance directory sits on a shared file system and `bb_root` on
//! node-local storage, which is where the client socket lives too: a process reaches only the
//! daemons of its own host, and finds them in the host table by its host name. On one machine
//! everything can live under one directory.

use crate::hosts::HostTable;
use crate::instance_dir::{self, Secrecy};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tessera_core::{Errno, FsError, Model};

/// Default largest frame: a 16 MiB read plus headroom. Bounds what a peer can make us buffer.
pub const DEFAULT_MAX_FRAME: u32 = 17 << 20;

/// Contents of `instance.toml`. Every tunable names its trade-off.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InstanceConfig {
    /// Number of daemons (nodes). Fixed for the life of the instance: placement hashes over it.
    pub nodes: u32,
    /// Prefix under which users name Tessera paths.
    pub mount: String,
    /// Directory of the underlying parallel file system that flush writes to and unowned
    /// ranges are read from.
    pub pfs_dir: PathBuf,
    /// Root of the node-local burst buffers; node K uses `<bb_root>/node-K`.
    pub bb_root: PathBuf,
    /// Stripe size for ownership placement: smaller spreads one file over more daemons, larger
    /// keeps a process's attach on fewer daemons.
    pub stripe_size: u64,
    /// Consistency model for opens that do not choose one.
    pub default_model: Model,
    /// Largest frame accepted on any socket, in bytes: larger allows bigger single reads,
    /// smaller bounds the memory a malicious or broken peer can tie up.
    pub max_frame: u32,
    /// Where daemons listen for peers (the port is chosen at start and published in the host
    /// table): an address (`127.0.0.1`, the one-machine default), a network in CIDR notation
    /// (`10.1.0.0/16`: the host's address inside it), an interface name (`ib0`), or `auto`
    /// (the host's first non-loopback IPv4 address). Anything but a loopback literal makes a
    /// multi-host instance, in which a loopback address is never registered.
    pub listen_host: String,
    /// Burst-buffer bytes each node may hold; 0 means "until the device is full".
    pub bb_capacity: u64,
    /// What daemon state (namespace, ownership) survives: `process` (a daemon crash or
    /// `kill -9`; state changes reach the page cache before they are acknowledged, like the
    /// burst-buffer logs themselves) or `machine` (also a power cut: one device flush per
    /// group of changes, about 0.2-1 ms each on common disks).
    #[serde(default)]
    pub state_durability: StateDurability,
    /// Milliseconds without state changes after which a daemon checkpoints its state log
    /// into its database: shorter keeps the log (and the replay at a restart) small, longer
    /// keeps the checkpoint's CPU and disk work away from a busy application.
    #[serde(default = "default_checkpoint_idle_ms")]
    pub state_checkpoint_idle_ms: u64,
    /// Milliseconds a daemon waits for a new peer connection to prove it holds the secret
    /// (and a connecting daemon for the peer's proof): shorter drops idle or hostile
    /// connections sooner, longer tolerates slower networks.
    #[serde(default = "default_handshake_ms")]
    pub peer_handshake_timeout_ms: u64,
    /// Milliseconds a peer may stay silent (its link down, its host gone) before the requests
    /// that need it fail with EHOSTDOWN naming its host: shorter reports a lost host sooner,
    /// longer rides out network stalls. Enforced by TCP keepalive and TCP_USER_TIMEOUT, so a
    /// long request to a live peer (a large flush) is not cut short.
    #[serde(default = "default_peer_timeout_ms")]
    pub peer_timeout_ms: u64,
    /// What the peer protocol protects (`auth`, `integrity` or `privacy`; every daemon of the
    /// instance must use the same): `auth`, the default, authenticates every connection and
    /// every control message and covers file bytes with a CRC32C, so nobody without the secret
    /// connects, injects or replays, and corruption is caught; `integrity` also MACs every
    /// file byte (an attacker already on the path cannot alter them), a keyed BLAKE3 pass
    /// over every byte on each side instead of a CRC32C (3x slower a byte, measured by
    /// `tessera-bench run ops`); `privacy` encrypts every byte (AES-256-GCM).
    #[serde(default)]
    pub security: crate::peer_auth::Security,
    /// Peer connections that may be in their handshake at once; more are closed at once.
    /// Bounds what unauthenticated connections can tie up.
    #[serde(default = "default_max_handshakes")]
    pub peer_max_handshakes: u32,
    /// Milliseconds a lock outlives the last renewal by its holder's daemon: a holder whose
    /// daemon stops answering (stopped, or its link down) loses its locks this long after it
    /// was last heard. Shorter frees the bytes sooner; longer rides out longer stalls.
    #[serde(default = "default_lock_lease_ms")]
    pub lock_lease_ms: u64,
    /// Milliseconds a client may answer stat from attributes it cached, unless the entry's
    /// shard tells its daemon of a change first; 0 turns the cache off.
    #[serde(default = "default_attr_lease_ms")]
    pub attr_lease_ms: u64,
    /// Whether each client gets a request ring (shared memory) to its daemon for small
    /// requests: a round trip without a system call while both run, for at most 50 µs of
    /// watching on each side after each request. False keeps every request on the socket
    /// (no watching at all, for nodes where every core is the application's).
    #[serde(default = "default_client_ring")]
    pub client_ring: bool,
    /// Bytes of a ring's answer area: answers up to this size, file bytes of reads included,
    /// reach the client through shared memory (one copy, into the caller's buffer) instead
    /// of the socket (three). The default holds the largest read (16 MiB) and its answer.
    /// The area's pages are the node's memory once used: a client whose reads are this large
    /// keeps this much of it until it disconnects. Smaller saves memory on nodes with many
    /// processes; larger answers then take the socket.
    #[serde(default = "default_ring_answer_bytes")]
    pub ring_answer_bytes: u32,
    /// Milliseconds an open transaction outlives the last of its processes: one none of whose
    /// processes can still vote aborts this long after the last one ended (D2T).
    #[serde(default = "default_txn_timeout_ms")]
    pub txn_timeout_ms: u64,
    /// Milliseconds the burst-buffer copy a migration moved away from stays readable (seed
    /// 001): readers that learned the old owner just before the move still find the bytes
    /// there. Longer protects slower readers; shorter returns the space sooner.
    #[serde(default = "default_migrate_grace_ms")]
    pub migrate_grace_ms: u64,
    /// Extended attributes one file may hold: more lets tools keep more metadata per file;
    /// fewer bounds what one file's attributes take of its daemon's memory and state. A set
    /// beyond it is ENOSPC.
    #[serde(default = "default_xattr_max_count")]
    pub xattr_max_count: u32,
    /// Bytes of extended attribute names and values one file may hold (each value is at most
    /// 64 KiB, as on Linux): the same trade-off as `xattr_max_count`, in bytes.
    #[serde(default = "default_xattr_max_bytes")]
    pub xattr_max_bytes: u64,
    /// The port each daemon serves its metrics on (Prometheus's text format, at
    /// `http://ADDR:PORT/metrics`); unset, no daemon serves any. 0 takes any free port
    /// (`tessera status` names it). On one machine (a loopback `listen_host`) node K serves
    /// on `metrics_port + K`.
    #[serde(default)]
    pub metrics_port: Option<u16>,
    /// The address the metrics are served on: `127.0.0.1` (the default) lets only this
    /// host's processes scrape them; `0.0.0.0` lets a Prometheus server elsewhere do so.
    #[serde(default = "default_metrics_addr")]
    pub metrics_addr: String,
}

fn default_metrics_addr() -> String {
    "127.0.0.1".to_string()
}

fn default_xattr_max_count() -> u32 {
    tessera_core::xattrs::DEFAULT_MAX_COUNT
}

fn default_xattr_max_bytes() -> u64 {
    tessera_core::xattrs::DEFAULT_MAX_BYTES
}

fn default_migrate_grace_ms() -> u64 {
    30_000
}

fn default_client_ring() -> bool {
    true
}

fn default_ring_answer_bytes() -> u32 {
    (16 << 20) + (64 << 10)
}

fn default_attr_lease_ms() -> u64 {
    1_000
}

fn default_lock_lease_ms() -> u64 {
    10_000
}

fn default_txn_timeout_ms() -> u64 {
    10_000
}

fn default_handshake_ms() -> u64 {
    5000
}

fn default_peer_timeout_ms() -> u64 {
    30_000
}

fn default_max_handshakes() -> u32 {
    64
}

fn default_checkpoint_idle_ms() -> u64 {
    2000
}

/// See [`InstanceConfig::state_durability`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StateDurability {
    #[default]
    Process,
    Machine,
}

impl InstanceConfig {
    /// Fields that instance.toml leaves out while they are unset.
    pub const OPTIONAL_FIELDS: &[&str] = &["metrics_port"];

    pub fn new(nodes: u32, pfs_dir: PathBuf, bb_root: PathBuf) -> Self {
        InstanceConfig {
            nodes,
            mount: tessera_core::path::DEFAULT_MOUNT.to_string(),
            pfs_dir,
            bb_root,
            stripe_size: tessera_core::placement::DEFAULT_STRIPE_SIZE,
            default_model: Model::Session,
            max_frame: DEFAULT_MAX_FRAME,
            listen_host: "127.0.0.1".to_string(),
            bb_capacity: 0,
            state_durability: StateDurability::Process,
            state_checkpoint_idle_ms: default_checkpoint_idle_ms(),
            peer_handshake_timeout_ms: default_handshake_ms(),
            peer_timeout_ms: default_peer_timeout_ms(),
            security: Default::default(),
            ring_answer_bytes: default_ring_answer_bytes(),
            peer_max_handshakes: default_max_handshakes(),
            lock_lease_ms: default_lock_lease_ms(),
            attr_lease_ms: default_attr_lease_ms(),
            client_ring: default_client_ring(),
            txn_timeout_ms: default_txn_timeout_ms(),
            migrate_grace_ms: default_migrate_grace_ms(),
            xattr_max_count: default_xattr_max_count(),
            xattr_max_bytes: default_xattr_max_bytes(),
            metrics_port: None,
            metrics_addr: default_metrics_addr(),
        }
    }

    /// What one file's extended attributes may hold.
    pub fn xattr_limits(&self) -> tessera_core::xattrs::XattrLimits {
        tessera_core::xattrs::XattrLimits {
            max_count: self.xattr_max_count,
            max_bytes: self.xattr_max_bytes,
        }
    }

    /// Checks values a hand-edited file could get wrong.
    pub fn validate(&self) -> Result<(), FsError> {
        let bad = |m: String| Err(FsError::new(Errno::Inval, m));
        if self.nodes == 0 || self.nodes > 65_535 {
            return bad(format!(
                "instance.toml: nodes = {} must be between 1 and 65535",
                self.nodes
            ));
        }
        if self.stripe_size < 4096 {
            return bad(format!(
                "instance.toml: stripe_size = {} must be at least 4096",
                self.stripe_size
            ));
        }
        if self.max_frame < 1 << 20 {
            return bad(format!(
                "instance.toml: max_frame = {} must be at least 1 MiB",
                self.max_frame
            ));
        }
        if self.peer_timeout_ms < 300 {
            return bad(format!(
                "instance.toml: peer_timeout_ms = {} must be at least 300",
                self.peer_timeout_ms
            ));
        }
        if self.lock_lease_ms < 100 {
            return bad(format!(
                "instance.toml: lock_lease_ms = {} must be at least 100",
                self.lock_lease_ms
            ));
        }
        if self.attr_lease_ms > 60_000 {
            return bad(format!(
                "instance.toml: attr_lease_ms = {} is above the most, 60000 (a change may wait that long for a holder that died)",
                self.attr_lease_ms
            ));
        }
        if self.peer_max_handshakes == 0 || self.peer_handshake_timeout_ms == 0 {
            return bad(format!(
                "instance.toml: peer_max_handshakes = {} and peer_handshake_timeout_ms = {} must be at least 1",
                self.peer_max_handshakes, self.peer_handshake_timeout_ms
            ));
        }
        if !(64 << 10..=64 << 20).contains(&self.ring_answer_bytes)
            || !self.ring_answer_bytes.is_multiple_of(8)
        {
            return bad(format!(
                "instance.toml: ring_answer_bytes = {} must be a multiple of 8 from 65536 (64 KiB) to 67108864 (64 MiB)",
                self.ring_answer_bytes
            ));
        }
        if !self.mount.starts_with('/') {
            return bad(format!(
                "instance.toml: mount = '{}' must be an absolute path",
                self.mount
            ));
        }
        Ok(())
    }

    /// Largest data payload one read request may ask for, leaving room for the envelope.
    pub fn max_read_chunk(&self) -> u64 {
        u64::from(self.max_frame - (64 << 10)).min(16 << 20)
    }

    /// Burst-buffer directory of `node`.
    pub fn bb_dir(&self, node: u32) -> PathBuf {
        self.bb_root.join(format!("node-{node}"))
    }

    /// The Unix socket of `node`'s clients: in its burst-buffer directory, which is node-local
    /// and private to the instance's user.
    pub fn socket_path(&self, node: u32) -> PathBuf {
        self.bb_dir(node).join("daemon.sock")
    }

    /// Directory holding the logs on `node`.
    pub fn logs_dir(&self, node: u32) -> PathBuf {
        self.bb_dir(node).join("logs")
    }

    /// Data and index log of log id `log` (a process, or a transaction's members) on `node`:
    /// one log for every file it writes there.
    pub fn log_paths(&self, node: u32, log: u64) -> (PathBuf, PathBuf) {
        let d = self.logs_dir(node);
        (
            d.join(format!("{log}.data")),
            d.join(format!("{log}.index")),
        )
    }

    /// Where a file lives on the PFS.
    pub fn pfs_path(&self, path: &str) -> PathBuf {
        self.pfs_dir.join(path.trim_start_matches('/'))
    }
}

/// Paths inside an instance directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceLayout {
    pub dir: PathBuf,
}

impl InstanceLayout {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        InstanceLayout { dir: dir.into() }
    }

    /// The instance named by `TESSERA_INSTANCE`, else [`default_instance_dir`].
    pub fn from_env() -> Self {
        match std::env::var_os("TESSERA_INSTANCE") {
            Some(d) if !d.is_empty() => InstanceLayout::new(PathBuf::from(d)),
            _ => InstanceLayout::new(default_instance_dir()),
        }
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.join("instance.toml")
    }
    pub fn secret_path(&self) -> PathBuf {
        self.dir.join("secret")
    }
    pub fn hosts_path(&self) -> PathBuf {
        self.dir.join("hosts.toml")
    }
    pub fn hosts_lock_path(&self) -> PathBuf {
        self.dir.join("hosts.lock")
    }
    pub fn log_file(&self, node: u32) -> PathBuf {
        self.logs_dir().join(Self::log_name(node))
    }
    /// The name of daemon `node`'s log in `logs/`.
    pub fn log_name(node: u32) -> String {
        format!("node-{node}.log")
    }
    pub fn logs_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    /// Checks that the directory and what Tessera keeps in it (`instance.toml`, `secret`,
    /// `hosts.toml`, `hosts.lock`, `logs/`), where they exist, are the user's own: not links,
    /// owned by the user, writable by the user alone (the secret readable by them alone).
    /// Commands that start, stop or inspect daemons check this before anything else.
    pub fn check_trusted(&self) -> Result<(), FsError> {
        if let Err(e) = self.dir.symlink_metadata() {
            if e.kind() == std::io::ErrorKind::NotFound {
                // Nothing there to trust or distrust: what reads it next says it is missing.
                return Ok(());
            }
            return Err(FsError::io(format!("{}", self.dir.display()), &e));
        }
        instance_dir::check_dir(&self.dir)?;
        instance_dir::open_read(&self.config_path(), Secrecy::Readable)?;
        instance_dir::open_read(&self.secret_path(), Secrecy::Private)?;
        instance_dir::open_read(&self.hosts_path(), Secrecy::Readable)?;
        instance_dir::open_read(&self.hosts_lock_path(), Secrecy::Readable)?;
        let logs = self.logs_dir();
        if logs.symlink_metadata().is_ok() {
            instance_dir::check_dir(&logs)?;
        }
        Ok(())
    }

    /// Opens a log of the instance (`logs/<name>`) for appending, making `logs/` if it is
    /// missing; neither is followed through a link, and both must be the user's own.
    pub fn open_log(&self, name: &str) -> Result<std::fs::File, FsError> {
        instance_dir::check_dir(&self.dir)?;
        let dir = self.logs_dir();
        instance_dir::make_dir(&dir)?;
        instance_dir::open_write(&dir.join(name), true)
    }

    /// Reads and validates `instance.toml`, once the directory and the file are checked to be
    /// the user's own ([`crate::instance_dir`]).
    pub fn load_config(&self) -> Result<InstanceConfig, FsError> {
        let path = self.config_path();
        let missing = || {
            FsError::new(
                Errno::ConnRefused,
                format!(
                    "no Tessera instance at {} (missing {}); start one with `tessera start --instance {}`",
                    self.dir.display(),
                    path.display(),
                    self.dir.display()
                ),
            )
        };
        match self.dir.symlink_metadata() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(missing()),
            Err(e) => return Err(FsError::io(format!("{}", self.dir.display()), &e)),
            Ok(_) => {}
        }
        instance_dir::check_dir(&self.dir)?;
        let text = instance_dir::read_to_string(&path, Secrecy::Readable)?.ok_or_else(missing)?;
        let cfg: InstanceConfig = toml::from_str(&text)
            .map_err(|e| FsError::new(Errno::Inval, format!("{}: {e}", path.display())))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Writes `instance.toml` (atomically: temporary file, then rename).
    pub fn save_config(&self, cfg: &InstanceConfig) -> Result<(), FsError> {
        cfg.validate()?;
        let text = toml::to_string_pretty(cfg).expect("config serializes");
        write_atomic(&self.config_path(), text.as_bytes())
    }

    /// Reads the host table (empty if no daemon registered yet).
    pub fn load_hosts(&self) -> Result<HostTable, FsError> {
        match instance_dir::read_to_string(&self.hosts_path(), Secrecy::Readable)? {
            Some(text) => HostTable::parse(&text),
            None => Ok(HostTable::default()),
        }
    }

    /// Changes the host table under its lock and replaces the file atomically; returns what
    /// `change` returned.
    pub fn update_hosts<T>(&self, change: impl FnOnce(&mut HostTable) -> T) -> Result<T, FsError> {
        let lp = self.hosts_lock_path();
        let lock = instance_dir::open_write(&lp, false)?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| FsError::io(format!("locking {}", lp.display()), &e.into()))?;
        let mut table = self.load_hosts()?;
        let out = change(&mut table);
        write_atomic(&self.hosts_path(), table.to_text()?.as_bytes())?;
        Ok(out)
    }

    /// Reads the instance secret.
    pub fn load_secret(&self) -> Result<Vec<u8>, FsError> {
        let p = self.secret_path();
        let text = instance_dir::read_to_string(&p, Secrecy::Private)?.ok_or_else(|| {
            FsError::new(
                Errno::NoEnt,
                format!(
                    "the instance secret {} is missing; the instance cannot be used (start a new one in another directory)",
                    p.display()
                ),
            )
        })?;
        decode_hex(text.trim())
            .ok_or_else(|| FsError::new(Errno::Inval, format!("{}: not a hex secret", p.display())))
    }
}

/// Default instance directory for this user, in a place private to them: `tessera` in
/// `$XDG_RUNTIME_DIR` (made by the login manager, 0700), else `.tessera` in the home
/// directory. Never a predictable name in a directory everyone can write, where another user
/// could make it first (and the checks of [`crate::instance_dir`] would then refuse it).
pub fn default_instance_dir() -> PathBuf {
    default_instance_dir_in(|k| std::env::var_os(k))
}

fn default_instance_dir_in(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    let set = |k| env(k).filter(|v| Path::new(v).is_absolute());
    if let Some(run) = set("XDG_RUNTIME_DIR") {
        return Path::new(&run).join("tessera");
    }
    if let Some(home) = set("HOME") {
        return Path::new(&home).join(".tessera");
    }
    // Neither set: a name of the uid in /tmp, which the checks protect (refused, not taken
    // over, if another user made it).
    let uid = rustix::process::getuid().as_raw();
    PathBuf::from(format!("/tmp/tessera-{uid}"))
}

/// Writes a file so readers see either the old or the new contents. The file is private
/// (0600), and its temporary is created `O_EXCL | O_NOFOLLOW`, never through a planted link.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), FsError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    // Named by host and pid: processes on different hosts of a shared directory may share a pid.
    let tmp = path.with_extension(format!(
        "tmp.{}.{}",
        crate::hosts::this_host(),
        std::process::id()
    ));
    // A temporary of an earlier process with our pid (or a planted name) goes first.
    let _ = std::fs::remove_file(&tmp);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| FsError::io(format!("writing {}", tmp.display()), &e))?;
    std::fs::rename(&tmp, path)
        .map_err(|e| FsError::io(format!("renaming {} into place", tmp.display()), &e))
}

pub fn encode_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_instance_is_in_a_private_place() {
        fn env<'a>(
            vars: &'a [(&'static str, &'static str)],
        ) -> impl Fn(&str) -> Option<std::ffi::OsString> + 'a {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        }
        let both = [("XDG_RUNTIME_DIR", "/run/user/7"), ("HOME", "/home/u")];
        assert_eq!(
            default_instance_dir_in(env(&both)),
            Path::new("/run/user/7/tessera")
        );
        assert_eq!(
            default_instance_dir_in(env(&[("HOME", "/home/u"), ("XDG_RUNTIME_DIR", "")])),
            Path::new("/home/u/.tessera")
        );
        assert!(
            default_instance_dir_in(env(&[("HOME", "relative")]))
                .to_string_lossy()
                .starts_with("/tmp/tessera-")
        );
    }

    #[test]
    fn config_round_trips_through_toml() {
        let cfg = InstanceConfig::new(3, "/pfs".into(), "/bb".into());
        let text = toml::to_string_pretty(&cfg).unwrap();
        assert!(text.contains("default_model = \"session\""), "{text}");
        let back: InstanceConfig = toml::from_str(&text).unwrap();
        assert_eq!(back, cfg);
    }

    #[test]
    fn bad_values_are_named() {
        let mut cfg = InstanceConfig::new(0, "/pfs".into(), "/bb".into());
        assert!(cfg.validate().unwrap_err().message.contains("nodes = 0"));
        cfg.nodes = 2;
        cfg.stripe_size = 10;
        assert!(cfg.validate().unwrap_err().message.contains("stripe_size"));
    }

    #[test]
    fn hex_round_trips() {
        assert_eq!(
            decode_hex(&encode_hex(&[0, 1, 255])).unwrap(),
            vec![0, 1, 255]
        );
        assert_eq!(decode_hex("zz"), None);
    }
}
