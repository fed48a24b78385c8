package adminui_test

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // RFC 6455 fixes SHA-1 for the handshake
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// A minimal Chrome DevTools Protocol client over a minimal RFC 6455 WebSocket client (text
// frames, client-side masking, fragmentation, ping/pong, close). The module has no
// WebSocket dependency, and the test needs nothing more.

type wsConn struct {
	conn net.Conn
	br   *bufio.Reader
}

func dialWS(rawURL string, timeout time.Duration) (*wsConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	conn, err := net.DialTimeout("tcp", u.Host, timeout)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(timeout)) //nolint:errcheck
	nonce := make([]byte, 16)
	rand.Read(nonce) //nolint:errcheck
	key := base64.StdEncoding.EncodeToString(nonce)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", u.RequestURI(), u.Host, key)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		conn.Close()
		return nil, err
	}
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")) //nolint:gosec
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		conn.Close()
		return nil, fmt.Errorf("websocket handshake: %s", resp.Status)
	}
	return &wsConn{conn: conn, br: br}, nil
}

// writeFrame sends one masked frame (clients must mask).
func (c *wsConn) writeFrame(opcode byte, payload []byte) error {
	hdr := []byte{0x80 | opcode}
	switch n := len(payload); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n <= 0xffff:
		hdr = append(hdr, 0x80|126)
		hdr = binary.BigEndian.AppendUint16(hdr, uint16(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	mask := make([]byte, 4)
	rand.Read(mask) //nolint:errcheck
	masked := make([]byte, len(payload))
	for i, b := range payload {
		masked[i] = b ^ mask[i%4]
	}
	_, err := c.conn.Write(append(append(hdr, mask...), masked...))
	return err
}

// readMessage returns the next complete text or binary message, answering pings.
func (c *wsConn) readMessage() ([]byte, error) {
	var msg []byte
	for {
		var h [2]byte
		if _, err := io.ReadFull(c.br, h[:]); err != nil {
			return nil, err
		}
		fin, opcode, masked := h[0]&0x80 != 0, h[0]&0x0f, h[1]&0x80 != 0
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(c.br, b[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(c.br, b[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		var mask [4]byte
		if masked {
			if _, err := io.ReadFull(c.br, mask[:]); err != nil {
				return nil, err
			}
		}
		if n > 64<<20 {
			return nil, errors.New("websocket frame too large")
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(c.br, payload); err != nil {
			return nil, err
		}
		if masked {
			for i := range payload {
				payload[i] ^= mask[i%4]
			}
		}
		switch opcode {
		case 0x8: // close
			return nil, io.EOF
		case 0x9: // ping
			if err := c.writeFrame(0xA, payload); err != nil {
				return nil, err
			}
			continue
		case 0xA: // pong
			continue
		}
		msg = append(msg, payload...)
		if fin {
			return msg, nil
		}
	}
}

func (c *wsConn) Close() error {
	c.writeFrame(0x8, nil) //nolint:errcheck
	return c.conn.Close()
}

// cdp speaks the DevTools protocol on one target, synchronously: call sends a command and
// reads until its reply, queueing the events that arrive meanwhile; wait takes an event
// from the queue or reads until it arrives. Every read is bounded by the step timeout.
type cdp struct {
	ws      *wsConn
	id      int
	events  []cdpEvent
	timeout time.Duration
}

type cdpEvent struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

type cdpMessage struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
	cdpEvent
}

func (c *cdp) read() (cdpMessage, error) {
	c.ws.conn.SetReadDeadline(time.Now().Add(c.timeout)) //nolint:errcheck
	raw, err := c.ws.readMessage()
	if err != nil {
		return cdpMessage{}, err
	}
	var m cdpMessage
	return m, json.Unmarshal(raw, &m)
}

func (c *cdp) call(method string, params any, result any) error {
	c.id++
	if params == nil {
		params = struct{}{}
	}
	req, err := json.Marshal(map[string]any{"id": c.id, "method": method, "params": params})
	if err != nil {
		return err
	}
	c.ws.conn.SetWriteDeadline(time.Now().Add(c.timeout)) //nolint:errcheck
	if err := c.ws.writeFrame(0x1, req); err != nil {
		return err
	}
	for {
		m, err := c.read()
		if err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		switch {
		case m.ID == c.id && m.Error != nil:
			return fmt.Errorf("%s: %s", method, m.Error.Message)
		case m.ID == c.id:
			if result == nil {
				return nil
			}
			return json.Unmarshal(m.Result, result)
		case m.Method != "":
			c.events = append(c.events, m.cdpEvent)
		}
	}
}

func (c *cdp) wait(method string) (json.RawMessage, error) {
	for i, ev := range c.events {
		if ev.Method == method {
			c.events = append(c.events[:i:i], c.events[i+1:]...)
			return ev.Params, nil
		}
	}
	for {
		m, err := c.read()
		if err != nil {
			return nil, fmt.Errorf("waiting for %s: %w", method, err)
		}
		if m.Method == method {
			return m.Params, nil
		}
		if m.Method != "" {
			c.events = append(c.events, m.cdpEvent)
		}
	}
}
