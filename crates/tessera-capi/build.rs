//! Gives libtessera.so the soname of its ABI version, so programs linked against it keep
//! finding a compatible library (`scripts/install.sh` installs libtessera.so.0 and the
//! libtessera.so link that compilers look for).

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtessera.so.0");
}
