package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// The delivery-state resources: the clinician's "did Ray hear my change?"
// timeline, over the same MCP session and event stream the device card
// uses. care-delivery://{patient}/{domain} names the delivery state of the
// speakable fact care://{patient}/{domain}: every version with its time and
// author, and for each whether Ray heard it — when, on which kind of device,
// asked or unasked — or will at his next turn. A clinician's page reads it,
// subscribes to it (resources/subscribe), and re-reads it on each
// notifications/resources/updated, which is sent whenever the heard ledger
// moves for that fact (on any instance sharing the database) or the fact
// gets a new version.
//
// Who may read it (P-1, P-2, P-21): a principal holding care.write bound to
// the patient — the clinicians who write his plan. (/mcp itself admits only
// tokens holding a read scope, so a clinician's session token holds
// care.write and care.read.user, as `make run` prints one.) A reader without
// care.write, another patient's URI, an assistant-only domain (there is no
// delivery to Ray of what is never spoken, so none is ever served, whatever
// the scopes), an absent domain and a malformed URI are all the one
// not-found answer. The resource exposes delivery state, versions, times and
// authors only — never a fact's words: those are read from care:// with
// care.read.user, under the read contract.

// DeliveryScheme is the URI scheme of the delivery-state resources.
const DeliveryScheme = "care-delivery"

// DeliveryMIMEType is the MIME type of a delivery-state resource's contents.
const DeliveryMIMEType = "application/json"

// DeliveryPollInterval is how often the server looks for delivery changes
// committed by other instances on the same database (2 s); changes made by
// this instance's speech principal are seen at once.
const DeliveryPollInterval = 2 * time.Second

// DeliverySource is the heard ledger as the delivery-state resources read
// it. bridge/speech's Principal implements it; bridge/app wires it in as
// Extra.Delivery.
type DeliverySource interface {
	// Delivery returns the ledger's record of the speakable fact uri (an
	// unversioned care:// URI).
	Delivery(ctx context.Context, uri models.URI) (models.DeliveryRecord, error)
	// DeliveryChanges returns the facts whose delivery log grew after
	// cursor, and the cursor to pass next.
	DeliveryChanges(ctx context.Context, cursor int64) ([]models.URI, int64, error)
	// DeliveryCursor returns the cursor of the latest change.
	DeliveryCursor(ctx context.Context) (int64, error)
	// OnDelivery sets a signal called after each change this process
	// commits; it must not block.
	OnDelivery(fn func())
}

// DeliveryURI returns care-delivery://{patient}/{domain} for the fact u.
func DeliveryURI(u models.URI) string {
	return DeliveryScheme + "://" + u.Patient + "/" + u.Domain
}

// parseDeliveryURI returns the speakable fact a delivery-state URI names:
// exactly care-delivery://{patient}/{domain}, with the patient and domain
// rules of care URIs and no version.
func parseDeliveryURI(raw string) (models.URI, bool) {
	rest, ok := strings.CutPrefix(raw, DeliveryScheme+"://")
	if !ok {
		return models.URI{}, false
	}
	u, err := models.ParseURI("care://" + rest)
	if err != nil || u.Version != 0 || u.Audience() != models.AudienceUser || DeliveryURI(u) != raw {
		return models.URI{}, false
	}
	return u, true
}

// isDeliveryURI reports whether raw uses the delivery scheme (well-formed
// or not: such a URI is answered by the delivery handlers, never as a care
// URI).
func isDeliveryURI(raw string) bool { return strings.HasPrefix(raw, DeliveryScheme+"://") }

// canSeeDelivery reports whether p may read the delivery state of the fact
// u: care.write, and a binding to u's patient (models.CanWrite).
func canSeeDelivery(p models.Principal, u models.URI) bool {
	return p.CanWrite(u.Patient, models.AudienceUser)
}

// DeliveryTimeline is the contents of a care-delivery:// resource.
type DeliveryTimeline struct {
	Patient string `json:"patient"`
	Domain  string `json:"domain"`
	Topic   string `json:"topic"` // models.Topic: "walking" for weight_bearing
	Latest  int    `json:"latest"`
	// Heard is the version Ray last heard; 0 when never.
	Heard int `json:"heard"`
	// Followed: the speech principal follows the patient (a device is
	// linked to him), so a revision will reach him.
	Followed bool `json:"followed"`
	// AsOf is the server time of this answer (models.TimeLayout).
	AsOf string `json:"asOf"`
	// Versions are oldest first, one per version.
	Versions []DeliveryVersion `json:"versions"`
}

// DeliveryVersion is one version of the fact and where it stands with Ray
// (models.VersionDelivery). Times are models.TimeLayout (UTC); an absent
// time did not happen or was not recorded.
type DeliveryVersion struct {
	Version     int    `json:"version"`
	WrittenAt   string `json:"writtenAt"`
	AuthorID    string `json:"authorId"`
	AuthorLabel string `json:"authorLabel"`
	// State is heard | pending | unconfirmed | unchanged | replaced |
	// unasked | reading | nodevice (models.DeliveryState).
	State  models.DeliveryState `json:"state"`
	At     string               `json:"at,omitempty"`     // heard, unchanged or (unconfirmed) sent at
	Device models.Device        `json:"device,omitempty"` // screen | voice
	Via    models.Via           `json:"via,omitempty"`    // asked | card
	// WithdrawnAt: when Ray heard a later version (heard only).
	WithdrawnAt string `json:"withdrawnAt,omitempty"`
	// Withdraws (pending): the version the retraction withdraws; absent
	// for a first hearing.
	Withdraws int `json:"withdraws,omitempty"`
	// Offered (pending): put in a response whose delivery was never
	// confirmed; he will hear it again, saying so (P-24).
	Offered    bool   `json:"offered,omitempty"`
	QueuedAt   string `json:"queuedAt,omitempty"`
	OfferedAt  string `json:"offeredAt,omitempty"`
	NotifiedAt string `json:"notifiedAt,omitempty"` // told unasked, by notification, that a message waits
}

// deliveryNotFound is the not-found answer to a delivery-state request.
func deliveryNotFound(uri string) error { return NotFoundError(uri) }

// deliveryFact returns the fact a delivery-state request may see, or ok
// false when it may not (for any reason: the one not-found answer).
func (s *Server) deliveryFact(req mcp.Request, raw string) (models.URI, models.Principal, bool) {
	u, ok := parseDeliveryURI(raw)
	if !ok || s.extra.Delivery == nil {
		return models.URI{}, models.Principal{}, false
	}
	p := s.readPrincipal(req)
	if !canSeeDelivery(p, u) {
		return models.URI{}, models.Principal{}, false
	}
	return u, p, true
}

// readDelivery serves resources/read of a care-delivery:// URI.
func (s *Server) readDelivery(ctx context.Context, req *mcp.ReadResourceRequest, raw string) (*mcp.ReadResourceResult, error) {
	u, p, ok := s.deliveryFact(req, raw)
	if !ok {
		return nil, notFoundFor(req, raw)
	}
	tl, err := s.deliveryTimeline(ctx, p, u)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFoundFor(req, raw)
	}
	if err != nil {
		s.logger.ErrorContext(ctx, "resources/read: delivery state", "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error"}
	}
	b, err := json.Marshal(tl)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error"}
	}
	res := newReadResult(req)
	res.Contents = []*mcp.ResourceContents{{URI: raw, MIMEType: DeliveryMIMEType, Text: string(b)}}
	res.CacheScope = "private"
	return res, nil
}

// deliveryTimeline builds the timeline of the speakable fact u for p, who
// may see it. The versions are the receipts /verify serves publicly for a
// care:// chain (time, author, never the value), read as p narrowed to
// reading that one patient's speakable facts: the store's scheme and
// audience checks make an assistant-only domain store.ErrNotFound (P-1).
func (s *Server) deliveryTimeline(ctx context.Context, p models.Principal, u models.URI) (DeliveryTimeline, error) {
	reader := models.Principal{Subject: p.Subject, Scopes: []models.Scope{models.ScopeReadUser}, Patients: []string{u.Patient}}
	versions, err := s.st.History(ctx, reader, u.String())
	if err != nil {
		return DeliveryTimeline{}, err
	}
	if len(versions) == 0 {
		return DeliveryTimeline{}, store.ErrNotFound
	}
	rec, err := s.extra.Delivery.Delivery(ctx, u)
	if err != nil {
		return DeliveryTimeline{}, err
	}
	stamp := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(models.TimeLayout)
	}
	tl := DeliveryTimeline{
		Patient: u.Patient, Domain: u.Domain, Topic: models.Topic(u.Domain),
		Latest: len(versions), Heard: rec.Heard, Followed: rec.Followed, AsOf: stamp(s.now()),
	}
	for i, d := range models.Timeline(len(versions), rec) {
		v := versions[i]
		if v.Audience != models.AudienceUser || v.N != d.Version { // defence in depth (P-1)
			return DeliveryTimeline{}, store.ErrNotFound
		}
		tl.Versions = append(tl.Versions, DeliveryVersion{
			Version: v.N, WrittenAt: stamp(v.WrittenAt), AuthorID: v.AuthorID, AuthorLabel: v.AuthorLabel,
			State: d.State, At: stamp(d.At), Device: d.Device, Via: d.Via, WithdrawnAt: stamp(d.WithdrawnAt),
			Withdraws: d.Withdraws, Offered: d.Offered,
			QueuedAt: stamp(d.QueuedAt), OfferedAt: stamp(d.OfferedAt), NotifiedAt: stamp(d.NotifiedAt),
		})
	}
	return tl, nil
}

// subscribeDelivery authorizes resources/subscribe of a care-delivery://
// URI: exactly the URIs the request's principal may read (else the one
// not-found answer); the URI joins the session's registry.
func (s *Server) subscribeDelivery(ctx context.Context, req *mcp.SubscribeRequest, raw string) error {
	u, p, ok := s.deliveryFact(req, raw)
	if !ok {
		return deliveryNotFound(raw)
	}
	if _, err := s.deliveryTimeline(ctx, p, u); err != nil {
		return deliveryNotFound(raw)
	}
	st, _ := s.sessionOf(req)
	if st == nil {
		return deliveryNotFound(raw)
	}
	st.mu.Lock()
	st.subs[raw] = struct{}{}
	st.mu.Unlock()
	return nil
}

// watchDelivery sends notifications/resources/updated for a fact's
// delivery-state URI whenever its delivery log grows — at once for this
// process's changes (OnDelivery), within DeliveryPollInterval for another
// instance's — and whenever the store commits a new version of a speakable
// fact (its timeline gains a row, whether or not a device will hear it).
// Like every care notification it is re-authorized per session at send
// time (sendFilter, canSeeURI). It returns when ctx ends.
func (s *Server) watchDelivery(ctx context.Context, src DeliverySource, after int64) {
	wake := make(chan struct{}, 1)
	src.OnDelivery(func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	defer src.OnDelivery(nil)
	go func() {
		for {
			for ch := range s.st.Watch(ctx, after) {
				after = ch.Seq
				if ch.Audience == models.AudienceUser {
					s.deliveryUpdated(ctx, ch.URI.Unversioned())
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	var cursor int64
	for {
		c, err := src.DeliveryCursor(ctx)
		if err == nil {
			cursor = c
			break
		}
		s.logger.Warn("delivery log cursor", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(DeliveryPollInterval):
		}
	}
	tick := time.NewTicker(DeliveryPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-tick.C:
		}
		for {
			uris, next, err := src.DeliveryChanges(ctx, cursor)
			if err != nil {
				if ctx.Err() == nil {
					s.logger.Warn("delivery log changes", "err", err)
				}
				break
			}
			for _, u := range uris {
				s.deliveryUpdated(ctx, u)
			}
			if next == cursor {
				break
			}
			cursor = next
		}
	}
}

// deliveryUpdated notifies the sessions subscribed to u's delivery state,
// and the 2026-07-28 listen streams that listen to it (each re-authorized
// at send time, sendModern).
func (s *Server) deliveryUpdated(ctx context.Context, u models.URI) {
	params := &mcp.ResourceUpdatedNotificationParams{URI: DeliveryURI(u)}
	_ = s.mcp.ResourceUpdated(ctx, params)
	if s.modern != nil {
		_ = s.modern.ResourceUpdated(ctx, params)
	}
}
