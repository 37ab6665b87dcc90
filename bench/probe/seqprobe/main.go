// Command seqprobe asks whether "a call, a journal record and its
// fdatasync, a call" costs more than the sum of its parts timed apart, on
// this machine, for a trivial echo server over a unix socket — no
// herdbridge code. With -relay the calls cross one more goroutine each
// way (an io.Pipe and a relaying goroutine, as the stdio relay does in
// the gateway's BenchmarkRoundTrip). bench/notes.md ("P1 stdio vs floor")
// says what it showed.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

func main() {
	relay := flag.Bool("relay", false, "put an io.Pipe and a relaying goroutine between the caller and the socket, each way")
	n := flag.Int("n", 4000, "iterations a timing")
	rounds := flag.Int("rounds", 5, "rounds (the median is printed)")
	dir := flag.String("dir", "", "directory for the socket and the journal file (default: a temporary one; put it on the disk to measure)")
	flag.Parse()
	if err := run(*relay, *n, *rounds, *dir); err != nil {
		log.Fatal(err)
	}
}

func run(relay bool, n, rounds int, dir string) error {
	dir, err := os.MkdirTemp(dir, "seqprobe")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	defer ln.Close()
	go serveEcho(ln)
	sc, err := net.Dial("unix", sock)
	if err != nil {
		return err
	}
	var c io.ReadWriter = sc
	if relay {
		c = relayed(sc)
	}
	f, err := os.OpenFile(filepath.Join(dir, "journal"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	msg, rec, buf := make([]byte, 300), make([]byte, 600), make([]byte, 512)
	call := func() {
		if _, err := c.Write(msg); err != nil {
			log.Fatal(err)
		}
		for got := 0; got < len(msg); {
			m, err := c.Read(buf)
			if err != nil {
				log.Fatal(err)
			}
			got += m
		}
	}
	sync := func() {
		if _, err := f.Write(rec); err != nil {
			log.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			log.Fatal(err)
		}
	}
	var sums, seqs []float64
	for r := range rounds {
		two := perOp(n, func() { call(); call() })
		fs := perOp(n, sync)
		seq := perOp(n, func() { call(); sync(); call() })
		sums, seqs = append(sums, two+fs), append(seqs, seq)
		fmt.Printf("round %d: 2 calls %.1f µs, append+fsync %.1f µs, sum %.1f µs, in sequence %.1f µs: %.2fx\n", r+1, two, fs, two+fs, seq, seq/(two+fs))
	}
	slices.Sort(sums)
	slices.Sort(seqs)
	sum, seq := sums[len(sums)/2], seqs[len(seqs)/2]
	fmt.Printf("median (relay %v): sum %.1f µs, in sequence %.1f µs: %.2fx\n", relay, sum, seq, seq/sum)
	return nil
}

// perOp is fn's mean time in µs over n calls, after a warm-up.
func perOp(n int, fn func()) float64 {
	for range 200 {
		fn()
	}
	start := time.Now()
	for range n {
		fn()
	}
	return float64(time.Since(start).Nanoseconds()) / 1000 / float64(n)
}

func serveEcho(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() { _, _ = io.Copy(c, c) }()
	}
}

// relayed is sc behind an io.Pipe and a goroutine each way.
func relayed(sc net.Conn) io.ReadWriter {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() { _, _ = io.Copy(sc, inR) }()
	go func() { _, _ = io.Copy(outW, sc) }()
	return struct {
		io.Reader
		io.Writer
	}{outR, inW}
}
