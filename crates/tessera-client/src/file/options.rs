//! How to open a file: [`OpenOptions`], as `std::fs::OpenOptions` plus the consistency model.

use tessera_core::Model;
use tessera_core::posix::OpenIntent;

/// How to open a file.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    pub(super) read: bool,
    pub(super) write: bool,
    pub(super) create: bool,
    pub(super) exclusive: bool,
    pub(super) truncate: bool,
    pub(super) append: bool,
    pub(super) mode: u32,
    pub(super) model: Option<Model>,
}

impl OpenOptions {
    pub fn new() -> Self {
        OpenOptions {
            mode: 0o644,
            ..Default::default()
        }
    }
    pub fn read(&mut self, v: bool) -> &mut Self {
        self.read = v;
        self
    }
    pub fn write(&mut self, v: bool) -> &mut Self {
        self.write = v;
        self
    }
    pub fn create(&mut self, v: bool) -> &mut Self {
        self.create = v;
        self
    }
    /// With `create`: fail with EEXIST if the file exists.
    pub fn exclusive(&mut self, v: bool) -> &mut Self {
        self.exclusive = v;
        self
    }
    pub fn truncate(&mut self, v: bool) -> &mut Self {
        self.truncate = v;
        self
    }
    pub fn append(&mut self, v: bool) -> &mut Self {
        self.append = v;
        self
    }
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = mode;
        self
    }
    /// The consistency model of this handle (default: the instance's `default_model`).
    pub fn model(&mut self, m: Model) -> &mut Self {
        self.model = Some(m);
        self
    }

    /// Options from decoded `open(2)` flags and a creation mode: access, `O_CREAT`, `O_EXCL`
    /// (with `O_CREAT`), `O_TRUNC`. `O_APPEND` is left to the caller: a descriptor keeps its
    /// own position, and Linux accepts it on a read-only open.
    pub fn from_intent(intent: &OpenIntent, mode: u32) -> Self {
        let mut o = OpenOptions::new();
        o.read(intent.read)
            .write(intent.write)
            .create(intent.create)
            .exclusive(intent.create && intent.exclusive)
            .truncate(intent.truncate)
            .mode(mode & 0o7777);
        o
    }
}
