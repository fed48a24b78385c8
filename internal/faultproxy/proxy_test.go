package faultproxy

import (
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every connection by echoing what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }() //nolint:errcheck
		}
	}()
	return ln.Addr().String()
}

// A connection accepted before a Cut but still being set up when it ran is severed too: a
// test that cuts the database off must not find one connection still reaching it.
func TestCutReachesConnectionsBeingSetUp(t *testing.T) {
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Stall(true) // holds the accepted connection before it dials the server
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for p.Accepts() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the proxy never accepted the connection")
		}
		time.Sleep(time.Millisecond)
	}
	p.Cut()
	p.Stall(false)
	c.SetDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck
	if _, err := c.Write([]byte("ping")); err == nil {
		buf := make([]byte, 4)
		if n, err := io.ReadFull(c, buf); err == nil {
			t.Fatalf("the connection survived the cut and echoed %q", buf[:n])
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the connection was neither forwarded nor closed")
		}
	}
}
