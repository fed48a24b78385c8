package service_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"
)

func TestZZStall(t *testing.T) {
	w := newIbWorld(t)
	var agents []*ibWorld
	_ = agents
	as := []any{}
	_ = as
	var wg sync.WaitGroup
	list := make([]string, 0)
	_ = list
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = ctx
	var ags []*struct{}
	_ = ags
	agentsL := make([]interface{ Prime() map[string]any }, 0)
	_ = agentsL
	var all []string
	_ = all
	var prim []*struct{}
	_ = prim
	start := time.Now()
	var agts = make([]*ibAgentT, 0)
	for i := 0; i < 64; i++ {
		a := w.e.NewAgent(w.box, "ag"+itoaT(i), nil)
		a.Prime()
		agts = append(agts, &ibAgentT{a.Key})
	}
	for _, a := range agts {
		wg.Go(func() {
			r := w.e.Do("GET", "/api/v1/boxes/alpha/inbox?limit=1", a.key, nil, nil)
			if r.Status != http.StatusOK {
				t.Errorf("%d %s", r.Status, r.Raw)
			}
		})
	}
	wg.Wait()
	t.Logf("64 concurrent first inbox_list: %v", time.Since(start))
}

type ibAgentT struct{ key string }

func itoaT(i int) string { return string(rune('A'+i/26)) + string(rune('a'+i%26)) }
