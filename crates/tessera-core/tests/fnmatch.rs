//! `tessera find`'s name matching against glibc's `fnmatch`, the matcher of GNU find. Here
//! rather than beside the matcher because calling C needs unsafe code, which the core crate
//! forbids.

use proptest::prelude::*;
use tessera_core::find::{Filter, Matcher};
use tessera_core::meta::FileKind;

proptest! {
    /// Names against glibc's fnmatch (GNU find's matcher), over patterns of letters, dots
    /// and the metacharacters the crate shares with it.
    #[test]
    fn names_match_as_fnmatch_does(
        pattern in "[ab.*?]{0,6}|\\[!?[ab.]{1,2}\\][ab*]{0,3}",
        name in "[ab.]{0,6}",
    ) {
        let ours = Matcher::new(Filter { name: Some(pattern.clone()), ..Filter::default() })
            .unwrap()
            .entry_matches(&name, FileKind::File);
        let p = std::ffi::CString::new(pattern.clone()).unwrap();
        let n = std::ffi::CString::new(name.clone()).unwrap();
        // SAFETY: two NUL-terminated strings; fnmatch only reads them.
        let theirs = unsafe { libc::fnmatch(p.as_ptr(), n.as_ptr(), 0) } == 0;
        prop_assert_eq!(ours, theirs, "pattern {:?} name {:?}", pattern, name);
    }
}
