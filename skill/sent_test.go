package skill

import (
	"context"
	"slices"

	"github.com/unsay/unsay/models"
)

// OfferedResponse is Offered, recording sent — when it has a session and
// marks and Offered succeeded — as its session's last response (the last
// two kept, sent.Replaces replaced), as the heard ledger does.
func (f *fakeCare) OfferedResponse(ctx context.Context, patient string, offers []models.Offer, sent models.SentResponse) error {
	if err := f.Offered(ctx, patient, offers); err != nil {
		return err
	}
	if sent.Session == "" || len(sent.Marks) == 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sent == nil {
		f.sent = map[[2]string][]models.SentResponse{}
	}
	k := [2]string{patient, sent.Session}
	list := slices.DeleteFunc(slices.Clone(f.sent[k]), func(s models.SentResponse) bool {
		return s.ID == sent.ID || sent.Replaces != "" && s.ID == sent.Replaces
	})
	sent.Replaces, sent.Marks = "", slices.Clone(sent.Marks)
	list = append([]models.SentResponse{sent}, list...)
	f.sent[k] = list[:min(len(list), models.SentPerSession)]
	return nil
}

// SentResponses returns what OfferedResponse recorded for session.
func (f *fakeCare) SentResponses(_ context.Context, patient, session string) ([]models.SentResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent[[2]string{patient, session}]), nil
}
