package service

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/api"
)

// A claim's page is encoded once, item by item, within the byte budget (itemsWithinBudget,
// claimPage): its bytes must be exactly what encoding the generated InboxClaimResult of the
// same items gives, whether every item fits, the budget cuts the page, or the first item alone
// is over the budget; and the cut is where fitBudget's rule puts it.
func TestClaimPageIsTheEncodedResult(t *testing.T) {
	payload := json.RawMessage(`{ "k": [1, 2], "html": "<a href=\"x\">&</a>" }`)
	item := func(i int, body string) api.InboxItem {
		return api.InboxItem{InboxSeq: dec(int64(i)), Reasons: 2, Message: api.Message{
			BodyMd: body, MessageId: uuid.New(), MessageSeq: dec(int64(i)), ThreadRootId: new(uuid.New()),
			Files: []api.FileRef{}, MentionAgentIds: []uuid.UUID{}, RequestAgentIds: []uuid.UUID{}, Payload: &payload}}
	}
	var items []api.InboxItem
	for i := range 5 {
		items = append(items, item(i+1, strings.Repeat("<é & \u2028 \"x\"\n", 20*(i+1))))
	}
	itemLen := func(it api.InboxItem) int64 {
		raw, err := compactJSON(it)
		if err != nil {
			t.Fatal(err)
		}
		return int64(len(raw)) + 1
	}
	budgetFor := func(k int) int64 { // exactly the first k items
		b := int64(pageOverheadBytes)
		for _, it := range items[:k] {
			b += itemLen(it)
		}
		return b
	}
	for _, c := range []struct {
		name   string
		items  []api.InboxItem
		budget int64
		want   int
	}{
		{"no items", []api.InboxItem{}, 1 << 20, 0},
		{"all fit", items, 1 << 20, 5},
		{"all fit exactly", items, budgetFor(5), 5},
		{"cut after three", items, budgetFor(3), 3},
		{"cut one byte short of three", items, budgetFor(3) - 1, 2},
		{"first item over the budget", items, 10, 1},
	} {
		n, encoded, err := itemsWithinBudget(c.items, c.budget)
		if err != nil {
			t.Fatal(err)
		}
		if n != c.want {
			t.Errorf("%s: %d items fit, want %d", c.name, n, c.want)
		}
		for _, truncated := range []bool{false, true} {
			want, err := compactJSON(api.InboxClaimResult{Items: c.items[:n], Truncated: truncated})
			if err != nil {
				t.Fatal(err)
			}
			if got := claimPage(encoded, truncated); !bytes.Equal(got, want) {
				t.Errorf("%s: claim page\n%s\nwant\n%s", c.name, got, want)
			}
		}
	}
}

// BenchmarkClaimPage: a claim's page of 100 items (1 KiB bodies) as the claim builds it
// (encoded once within the budget), next to fitting the budget and then encoding the result
// again, as before.
func BenchmarkClaimPage(b *testing.B) {
	items := make([]api.InboxItem, 100)
	for i := range items {
		items[i] = api.InboxItem{InboxSeq: dec(int64(i + 1)), Reasons: 2, Message: api.Message{
			BodyMd: strings.Repeat("w4 body ", 128), MessageId: uuid.New(), MessageSeq: dec(int64(i + 1)), ThreadRootId: new(uuid.New()),
			Files: []api.FileRef{}, MentionAgentIds: []uuid.UUID{}, RequestAgentIds: []uuid.UUID{}}}
	}
	b.Run("encoded once", func(b *testing.B) {
		for b.Loop() {
			_, encoded, err := itemsWithinBudget(items, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			_ = claimPage(encoded, false)
		}
	})
	b.Run("fit, then encode the result", func(b *testing.B) {
		for b.Loop() {
			n, err := fitBudget(items, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := compactJSON(api.InboxClaimResult{Items: items[:n]}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
