package store

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/internal/testdb"
)

// directory_search folds case in every script whatever the database's locale (SPEC §4
// "case-insensitive substring"; 0024_directory_case_folding.sql): in a C-locale database, as
// the embedded cluster's, a role written "Émile ÜBER" is found by "über" and "ÉMILE" (outside
// probe: only A-Z were folded there), and the escaped % _ \ stay literal.
func TestDirectorySearchFoldsCaseInEveryScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := Open(ctx, testdb.NewEmptyCLocale(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	box, host, agent := uuid.New(), uuid.New(), uuid.New()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO boxes (box_id, box_key, created_at) VALUES ($1, 'fold', now())`, []any{box}},
		{`INSERT INTO hosts (box_id, host_id, name, ips, created_at) VALUES ($1, $2, 'local', '{127.0.0.1}', now())`, []any{box, host}},
		{`INSERT INTO agents (box_id, agent_id, host_id, name, role, listed, created_at) VALUES ($1, $2, $3, 'emile', 'Émile ÜBER 100% a_b', true, now())`, []any{box, agent, host}},
	} {
		if _, err := st.Pool().Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	search := func(pattern string) int {
		t.Helper()
		var n int
		err := st.InTx(ctx, func(tx *Tx) error {
			cards, err := tx.SearchDirectory(ctx, box, pattern, DirectoryPos{}, 10)
			n = len(cards)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for pattern, want := range map[string]int{
		"%über%": 1, "%ÜBER%": 1, "%émile%": 1, "%ÉMILE%": 1, "%EMILE%": 1, // EMILE matches the name
		`%100\%%`: 1, `%a\_b%`: 1, `%a\_c%`: 0, "%100x%": 0, "%uber%": 0,
	} {
		if got := search(pattern); got != want {
			t.Errorf("search %q: %d agents, want %d", pattern, got, want)
		}
	}
}
