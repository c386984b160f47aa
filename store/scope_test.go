package store

import (
	"context"
	"errors"
	"testing"

	"github.com/unsay/unsay/models"
)

// TestPublish_AssistantOnlyFactsNeedCareWriteAssistant: care.write alone
// once overwrote assistant-only facts its holder cannot read, and a 409
// told it which domains were assistant-only. Now a writer without
// care.write.assistant gets one refusal for every assistant-only write —
// an existing domain, a new one, a speakable domain asked as assistant, or
// an assistant-only domain asked as user — and nothing is written.
func TestPublish_AssistantOnlyFactsNeedCareWriteAssistant(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, newClock())
	ctx := context.Background()
	mustPublish(t, s, writer, in("risk", models.AudienceAssistant, "Fall risk HIGH."))
	mustPublish(t, s, writer, in("weight_bearing", models.AudienceUser, "Partial weight-bearing."))
	before, _ := s.LastSeq(ctx)
	for _, tc := range []struct {
		name string
		pi   PublishInput
	}{
		{"an existing assistant-only domain", in("risk", models.AudienceAssistant, "Fall risk LOW.")},
		{"a new assistant-only domain", in("mood", models.AudienceAssistant, "Low mood.")},
		{"a speakable domain asked as assistant", in("weight_bearing", models.AudienceAssistant, "Full weight-bearing.")},
		{"an assistant-only domain asked as user", in("risk", models.AudienceUser, "Fall risk LOW.")},
	} {
		_, err := s.Publish(ctx, userWriter, tc.pi)
		if !errors.Is(err, ErrNeedsAssistantWrite) || !errors.Is(err, ErrForbidden) || err.Error() != ErrNeedsAssistantWrite.Error() {
			t.Errorf("%s: Publish = %v, want exactly ErrNeedsAssistantWrite", tc.name, err)
		}
	}
	if last, _ := s.LastSeq(ctx); last != before {
		t.Fatalf("refused writes moved seq %d → %d", before, last)
	}
	r, err := s.Read(ctx, dualRay, "care-internal://ray/risk")
	if err != nil || r.Version.Value != "Fall risk HIGH." {
		t.Fatalf("the assistant-only fact changed: %+v, %v", r.Version, err)
	}

	// Positive twins: care.write writes speakable facts; with
	// care.write.assistant the assistant-only ones; and P-3 still answers
	// an audience change with ErrAudienceChange to a writer holding both.
	mustPublish(t, s, userWriter, in("weight_bearing", models.AudienceUser, "Full weight-bearing as tolerated."))
	mustPublish(t, s, userWriter, in("exercise", models.AudienceUser, "Ankle pumps."))
	if res := mustPublish(t, s, writer, in("risk", models.AudienceAssistant, "Fall risk LOW.")); res.Version.N != 2 {
		t.Fatalf("care.write.assistant write = v%d, want v2", res.Version.N)
	}
	if _, err := s.Publish(ctx, writer, in("risk", models.AudienceUser, "Fall risk LOW.")); !errors.Is(err, ErrAudienceChange) {
		t.Fatalf("audience change with both scopes = %v, want ErrAudienceChange", err)
	}
}
