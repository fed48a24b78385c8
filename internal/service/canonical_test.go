package service

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// decodeMarshal is the canonical form by definition: decode into `any` with json.Number,
// marshal again (maps marshal with sorted keys). hashArgs computed it this way until
// canonicalJSON, and idempotency records written then hold hashes of this form.
func decodeMarshal(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

var canonicalSeeds = []string{
	`{}`, `[]`, `null`, `{"b":1,"a":[true,false,null,-0.5e+3,"x"]}`, `{"z":{"y":{"x":"<&>"}},"a":"\u00e9\u2028"}`,
	`{"a":1,"a":2,"b":{"c":3,"c":4}}`, `"\ud800"`, "\"\xff\xfe\"", `{"k":"\/\b\f\n\r\t\"\\"}`, `[1E400,0,-0,1.0]`,
	`{"é":1,"e":2,"E":3,"":4}`, ` { "a" : [ 1 , 2 ] } `, `{"payload":{"q":[{"b":1,"a":2}],"p":"<script>"}}`,
	`{"` + strings.Repeat("k", 3) + `":1,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k3":0}`,
}

// FuzzCanonicalJSONIsDecodeMarshal: for every JSON document encoding/json accepts,
// canonicalJSON gives decodeMarshal's bytes exactly.
func FuzzCanonicalJSONIsDecodeMarshal(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		want, err := decodeMarshal(raw)
		if err != nil {
			return
		}
		got, err := canonicalJSON(raw)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("canonicalJSON(%q) = %q, %v; want %q", raw, got, err, want)
		}
	})
}

// The idempotency hash of arguments is the hash of their decode-and-marshal form, so records
// stored before canonicalJSON still match.
func TestHashArgsIsTheDecodeMarshalHash(t *testing.T) {
	args := map[string]any{"room_id": "r", "checkpoint": json.RawMessage(`{"b":[2,1],"a":"<\u00e9>","b":3}`), "n": json.Number("1.50")}
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	want, err := decodeMarshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := canonicalJSON(raw)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("canonicalJSON = %s, %v; want %s", got, err, want)
	}
	for _, s := range canonicalSeeds {
		want, werr := decodeMarshal([]byte(s))
		got, err := canonicalJSON([]byte(s))
		if (werr == nil) != (err == nil) || !bytes.Equal(got, want) {
			t.Errorf("canonicalJSON(%q) = %q, %v; want %q, %v", s, got, err, want, werr)
		}
	}
}

// BenchmarkHashArgs: the canonical form of a room send's arguments, in one pass
// (canonical) and by decoding and marshalling (decode_marshal).
func BenchmarkHashArgs(b *testing.B) {
	raw, err := json.Marshal(map[string]any{"destination": map[string]any{"kind": "room", "room_id": "0192f0c4-7a9e-7c3d-8f00-0123456789ab"},
		"body_md": strings.Repeat("lorem ipsum ", 85), "mention_agent_ids": []string{}, "payload": json.RawMessage(`{"step":3,"note":"x"}`)})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("canonical", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			canonicalJSON(raw) //nolint:errcheck
		}
	})
	b.Run("decode_marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			decodeMarshal(raw) //nolint:errcheck
		}
	})
}
