package speech

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/unsay/unsay/models"
)

// Committed tells the principal that the care store committed version of
// the fact uri at (the store's clock): the feed readiness is measured
// against. bridge/app calls it for every change of its store's change feed
// (URI and version only, never content, like a notification: P-9, P-18).
// Changes of facts the principal does not follow are ignored.
func (p *Principal) Committed(uri models.URI, version int, at time.Time) {
	p.do(func(st *state) { st.committed(uri, version, at) })
}

// State is the speech principal's health, as served in /readyz.
type State struct {
	// Ready: Connected, caught up with the store within MaxLag, and the last
	// confirmation at speak time (if any since the session started) worked.
	// Alexa traffic should only go to a ready instance (P-24).
	Ready bool `json:"ready"`
	// Connected: an MCP session is up and its initial sync (list, subscribe,
	// read) completed.
	Connected bool `json:"connected"`
	// LagSeconds is how long the oldest change the store committed
	// (Committed) to a followed fact has gone unread; 0 when none.
	LagSeconds float64 `json:"lagSeconds"`
	// Confirming is false after a confirmation at speak time failed, until
	// the next session has synced.
	Confirming bool `json:"confirming"`
	// LastEventAt is when the last notification arrived or the last sync
	// completed; zero before the first.
	LastEventAt time.Time `json:"lastEventAt"`
	// Backlog counts announcements queued for every patient, not yet heard.
	Backlog int `json:"backlog"`
	// Patients are the followed patient ids, sorted.
	Patients []string `json:"patients"`
}

// State returns a snapshot of the principal's health.
func (p *Principal) State() State {
	var s State
	p.do(func(st *state) {
		lag := st.lag(p.cfg.Clock())
		s = State{
			Connected:   st.connected,
			LagSeconds:  lag.Seconds(),
			Confirming:  !st.confirmFailing,
			LastEventAt: st.lastEventAt,
			Backlog:     st.backlog,
			Patients:    st.patientList(),
		}
		s.Ready = s.Connected && s.Confirming && lag <= p.cfg.MaxLag
	})
	return s
}

// Collectors returns the principal's Prometheus gauges, for the caller to
// register: unsay_speech_connected and unsay_speech_ready (1 or 0),
// unsay_speech_lag_seconds (State.LagSeconds), unsay_speech_backlog
// (announcements queued) and unsay_speech_last_event_timestamp_seconds
// (Unix seconds of LastEventAt; 0 before the first event).
func (p *Principal) Collectors() []prometheus.Collector {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "unsay_speech_connected",
			Help: "1 when the speech principal's MCP session is up and synced, else 0.",
		}, func() float64 { return b(p.State().Connected) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "unsay_speech_ready",
			Help: "1 when the speech principal is connected, caught up with the store and confirming facts at speak time, else 0.",
		}, func() float64 { return b(p.State().Ready) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "unsay_speech_lag_seconds",
			Help: "Seconds the oldest change the store committed to a followed fact has gone unread by the speech principal; 0 when none.",
		}, func() float64 { return p.State().LagSeconds }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "unsay_speech_backlog",
			Help: "Announcements queued for patients and not yet heard.",
		}, func() float64 { return float64(p.State().Backlog) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "unsay_speech_last_event_timestamp_seconds",
			Help: "Unix time of the last MCP notification or completed sync, in seconds.",
		}, func() float64 {
			t := p.State().LastEventAt
			if t.IsZero() {
				return 0
			}
			return float64(t.UnixNano()) / 1e9
		}),
	}
}
