// Package faultproxy is a TCP proxy that fault tests put between a server and its
// PostgreSQL: it forwards bytes unchanged until the test severs every connection (Cut),
// refuses new ones (Refuse) or stops forwarding while keeping every connection open (Stall),
// so a connection can be lost, or a database hang, at a chosen moment without stopping a
// PostgreSQL that other tests share.
package faultproxy

import (
	"net"
	"net/url"
	"strings"
	"sync"
)

// Proxy forwards connections from a loopback listener to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	resumed *sync.Cond // signalled when stalled turns false
	conns   map[net.Conn]struct{}
	refuse  bool
	stalled bool
	accepts int
	cuts    int // how many times Cut ran: a connection accepted before a cut must not outlive it
}

// New listens on 127.0.0.1 (an ephemeral port) and forwards to target ("host:port", or
// "unix:/path/to/socket").
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.resumed = sync.NewCond(&p.mu)
	go p.serve()
	return p, nil
}

// Accepts is how many connections the proxy has accepted, refused ones included.
func (p *Proxy) Accepts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepts
}

// Addr is the listener's address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// NewFor starts a proxy to the server of dbURL (TCP, or a unix socket given as
// ?host=/dir) and returns it with a URL for the same database through the proxy.
func NewFor(dbURL string) (*Proxy, string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, "", err
	}
	q := u.Query()
	target := u.Host
	if dir := q.Get("host"); strings.HasPrefix(dir, "/") {
		port := q.Get("port")
		if port == "" {
			port = "5432"
		}
		target = "unix:" + dir + "/.s.PGSQL." + port
		q.Del("host")
		q.Del("port")
		u.RawQuery = q.Encode()
	}
	p, err := New(target)
	if err != nil {
		return nil, "", err
	}
	u.Host = p.Addr()
	return p, u.String(), nil
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse, cuts := p.refuse, p.cuts
		p.accepts++
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		go p.forward(c, cuts)
	}
}

// forward pipes client to a new server connection. cuts is the Cut count when client was
// accepted: a Cut (or Refuse) while the server was being dialled reaches this connection too,
// as it would have had the connection been registered already.
func (p *Proxy) forward(client net.Conn, cuts int) {
	network, addr := "tcp", p.target
	if path, ok := strings.CutPrefix(p.target, "unix:"); ok {
		network, addr = "unix", path
	}
	p.waitWhileStalled()
	server, err := net.Dial(network, addr)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	if p.cuts != cuts || p.refuse {
		p.mu.Unlock()
		server.Close()
		client.Close()
		return
	}
	p.conns[client] = struct{}{}
	p.conns[server] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.waitWhileStalled()
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil { // ends when either side closes
				break
			}
		}
		dst.Close()
		src.Close()
	}
	go pipe(server, client)
	go pipe(client, server)
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// Cut severs every open connection at once, in both directions: the client sees its
// connection reset or closed, the server sees its client go away.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cuts++
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) //nolint:errcheck // a reset, like a dead peer
		}
		c.Close()
	}
}

// Refuse makes the proxy close new connections at once (on) or forward them again (off).
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
}

// Stall makes the proxy hold every byte, in both directions, and every new connection
// before it reaches the server (on), as a stopped or hung server does: connections stay open
// and nothing answers. Off forwards what was held and resumes.
func (p *Proxy) Stall(on bool) {
	p.mu.Lock()
	p.stalled = on
	p.mu.Unlock()
	if !on {
		p.resumed.Broadcast()
	}
}

func (p *Proxy) waitWhileStalled() {
	p.mu.Lock()
	for p.stalled {
		p.resumed.Wait()
	}
	p.mu.Unlock()
}

// Open is the number of forwarded connections currently open (client and server sides).
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns) / 2
}

// Close stops listening and severs every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Stall(false)
	p.Cut()
}
