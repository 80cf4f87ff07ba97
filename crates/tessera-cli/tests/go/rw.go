// A Go program that writes a file and reads it back with Go's own system calls (Go makes
// them itself, not through libc, so LD_PRELOAD never sees them): the FUSE mount's case.
package main

import (
	"bytes"
	"fmt"
	"os"
)

func main() {
	path := os.Args[1]
	want := bytes.Repeat([]byte("go-through-fuse "), 4096)
	if err := os.WriteFile(path, want, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "write:", err)
		os.Exit(1)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "read:", err)
		os.Exit(1)
	}
	if !bytes.Equal(got, want) {
		fmt.Fprintln(os.Stderr, "read back other bytes")
		os.Exit(1)
	}
	info, err := os.Stat(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stat:", err)
		os.Exit(1)
	}
	fmt.Println(info.Size())
}
