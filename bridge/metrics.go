package bridge

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the bridge's Prometheus collectors, registered on a registry
// owned by the Server (no package-level registry). Names are prefixed unsay_.
type metrics struct {
	reg                   *prometheus.Registry
	requests              *prometheus.CounterVec // unsay_http_requests_total{route,code}
	notificationsSent     *prometheus.CounterVec // unsay_mcp_notifications_sent_total{method}
	notificationsWithheld *prometheus.CounterVec // unsay_mcp_notifications_withheld_total{method}
	replayWithheld        prometheus.Counter     // unsay_mcp_replay_frames_withheld_total
	publish               prometheus.Histogram   // unsay_publish_latency_seconds
	fanOut                prometheus.Histogram   // unsay_change_fanout_delay_seconds
	sessionsClosed        *prometheus.CounterVec // unsay_mcp_sessions_closed_total{reason}
	listensEnded          *prometheus.CounterVec // unsay_mcp_listen_streams_ended_total{reason}
	auditLost             prometheus.Counter     // unsay_write_audit_rows_lost_total
}

func newMetrics(sessions, subscriptions, listens func() float64) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "unsay_http_requests_total",
			Help: "HTTP requests served, by chi route pattern and status code.",
		}, []string{"route", "code"}),
		notificationsSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "unsay_mcp_notifications_sent_total",
			Help: "MCP notifications written to a session, by method.",
		}, []string{"method"}),
		notificationsWithheld: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "unsay_mcp_notifications_withheld_total",
			Help: "MCP notifications withheld at send time by re-authorization, by method.",
		}, []string{"method"}),
		replayWithheld: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "unsay_mcp_replay_frames_withheld_total",
			Help: "Stored frames replaced on Last-Event-ID replay because the resuming principal may not see them.",
		}),
		publish: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "unsay_publish_latency_seconds",
			Help:    "POST /write: time to a durable commit, in seconds.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1},
		}),
		fanOut: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "unsay_change_fanout_delay_seconds",
			Help:    "Time from a change's commit to the end of its notification fan-out, in seconds.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 5},
		}),
		sessionsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "unsay_mcp_sessions_closed_total",
			Help: "MCP sessions the server closed because their client did not keep up, by reason: overflow (stream queue full), write_timeout, keepalive (pings unanswered).",
		}, []string{"reason"}),
		listensEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "unsay_mcp_listen_streams_ended_total",
			Help: "2026-07-28 subscriptions/listen streams the server ended, by reason: tokenExpired, shutdown, overflow (stream queue full), write_timeout.",
		}, []string{"reason"}),
		auditLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "unsay_write_audit_rows_lost_total",
			Help: "POST /write attempts that got no audit row: the store could not commit it (a full or read-only disk, a locked database) before the server stopped, or too many kinds of attempt were waiting. Each is logged at ERROR.",
		}),
	}
	reg.MustRegister(m.auditLost, m.requests, m.notificationsSent, m.notificationsWithheld, m.replayWithheld, m.publish, m.fanOut, m.sessionsClosed, m.listensEnded,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "unsay_mcp_sessions",
			Help: "Open MCP sessions.",
		}, sessions),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "unsay_mcp_subscriptions",
			Help: "Resource subscriptions held by open MCP sessions and 2026-07-28 listen streams.",
		}, subscriptions),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "unsay_mcp_listen_streams",
			Help: "Open 2026-07-28 subscriptions/listen streams.",
		}, listens),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// ObservePublish records one write's time to durable commit (the
// unsay_publish_latency_seconds histogram). bridge/httpapi calls it through
// its Config.OnPublish.
func (s *Server) ObservePublish(d time.Duration) { s.metrics.publish.Observe(d.Seconds()) }

// ObserveAuditLost counts n /write attempts whose audit row could not be
// appended (unsay_write_audit_rows_lost_total). bridge/httpapi calls it
// through its Config.OnAuditLost.
func (s *Server) ObserveAuditLost(n int64) { s.metrics.auditLost.Add(float64(n)) }
