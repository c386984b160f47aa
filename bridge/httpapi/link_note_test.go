package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// TestLink_AFourthLiveCodeTellsTheCarerTheOldestWasRetired proves a carer
// is told when a new code retires the oldest live one (at most
// store.LinkMaxLiveCodes), with its expiry; the first codes carry no note.
func TestLink_AFourthLiveCodeTellsTheCarerTheOldestWasRetired(t *testing.T) {
	f := newFixture(t)
	carer := f.token("carer", []string{"ray"}, models.ScopeLink)
	var notes []string
	for range store.LinkMaxLiveCodes + 1 {
		a := f.do(http.MethodPost, "/link", []byte(`{"patient":"ray"}`), map[string]string{"Authorization": "Bearer " + carer})
		if a.status != http.StatusCreated {
			t.Fatalf("status %d: %s", a.status, a.body)
		}
		var l LinkResponse
		if err := json.Unmarshal(a.body, &l); err != nil {
			t.Fatal(err)
		}
		notes = append(notes, l.Note)
	}
	for i, n := range notes[:store.LinkMaxLiveCodes] {
		if n != "" {
			t.Errorf("code %d of %d carries a note: %q", i+1, store.LinkMaxLiveCodes, n)
		}
	}
	want := "3 codes were already live for ray; the oldest, valid until " + f.now.Add(store.LinkCodeTTL).UTC().Format("15:04") + " UTC, no longer works."
	if last := notes[store.LinkMaxLiveCodes]; !strings.EqualFold(last, want) {
		t.Errorf("fourth code's note %q, want %q", last, want)
	}
}
