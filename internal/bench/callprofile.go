package bench

import (
	"context"
)

// callProfiles gives lines measured one call at a time (W6) the same per-operation database
// profile the throughput workloads get from their windows: pg_stat_statements and the WAL
// position are read between consecutive calls of the one client, and each call's difference
// is added to its line. A window per line would not do: W6 measures its lines in turn,
// round by round, so that the machine's noise falls on all of them alike. The reads run
// between calls, outside the measured latency; statement texts are read once at the end
// (pg_stat_statements without texts is cheap to read). No CPU figures: per call, the
// reads' own CPU would be most of them. Nil (every method a no-op) without
// pg_stat_statements.
type callProfiles struct {
	h     *harness
	prev  counters
	lines map[string]*pooledPhase // each line's calls, pooled as W5 pools its rounds
}

func (h *harness) newCallProfiles(ctx context.Context) *callProfiles {
	if !h.statements || h.pool == nil {
		return nil
	}
	p := &callProfiles{h: h, lines: map[string]*pooledPhase{}}
	p.prev = p.read(ctx)
	return p
}

// read is a snapshot of the WAL position and the statements' calls and times (no texts, no
// CPU).
func (p *callProfiles) read(ctx context.Context) counters {
	var c counters
	p.h.readWAL(ctx, &c)
	c.stmts = p.h.readStatements(ctx, statsCountsQuery)
	return c
}

// done adds what the database did since the previous mark to line id, as one operation.
func (p *callProfiles) done(ctx context.Context, id string) {
	if p == nil {
		return
	}
	now := p.read(ctx)
	line := p.lines[id]
	if line == nil {
		line = newPooledPhase()
		p.lines[id] = line
	}
	line.add(&phaseResult{Ops: 1}, p.prev, now)
	p.prev = now
}

// skip starts the next mark from now, counting what ran since the last one nowhere
// (unmeasured rounds).
func (p *callProfiles) skip(ctx context.Context) {
	if p != nil {
		p.prev = p.read(ctx)
	}
}

// profiles sets each line's DB profile from its pooled calls, with the statements' texts,
// leaving out the profiler's own reads (as statsQuery does).
func (p *callProfiles) profiles(ctx context.Context, lines []Result) {
	if p == nil {
		return
	}
	texts := p.h.readStatements(ctx, statsQuery)
	for i := range lines {
		line, ok := p.lines[lines[i].ID]
		if !ok || lines[i].Status != StatusOK {
			continue
		}
		for q, r := range line.sum.stmts {
			text, known := texts[q]
			if !known { // the profiler's reads (and statements whose entries are gone since)
				delete(line.sum.stmts, q)
				continue
			}
			r.query = text.query
			line.sum.stmts[q] = r
		}
		lines[i].DB = line.result().DB
	}
}
