package alexaask

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Device is the Echo a request comes from: one Alexa user, one device, one
// session. The zero value of each field has a development default (see
// Request).
type Device struct {
	SkillID   string // context.System.application.applicationId
	UserID    string // default amzn1.ask.account.unsay-cli
	DeviceID  string // default amzn1.ask.device.unsay-cli
	SessionID string // default: a fresh amzn1.echo-api.session.… per Device
	Locale    string // default en-GB
	// Screen makes it an Echo Show: supportedInterfaces lists
	// Alexa.Presentation.APL with runtime.maxVersion APLVersion (default
	// 2024.3) and the context carries a 1280×800 hub viewport.
	Screen     bool
	APLVersion string
	Endpoint   string // apiEndpoint, default https://api.eu.amazonalexa.com

	turns int
}

// Request is an Alexa request envelope (the JSON an Echo POSTs to /alexa),
// shaped as the ASK request format. Only the fields Unsay reads, plus what every
// real request carries.
type Request struct {
	Version string         `json:"version"`
	Session *session       `json:"session,omitempty"`
	Context requestContext `json:"context"`
	Request requestBody    `json:"request"`
}

type session struct {
	New         bool        `json:"new"`
	SessionID   string      `json:"sessionId"`
	Application application `json:"application"`
	User        user        `json:"user"`
}

type application struct {
	ApplicationID string `json:"applicationId"`
}

type user struct {
	UserID string `json:"userId"`
}

type requestContext struct {
	System   system    `json:"System"`
	Viewport *viewport `json:"Viewport,omitempty"`
}

type system struct {
	Application application `json:"application"`
	User        user        `json:"user"`
	Device      device      `json:"device"`
	APIEndpoint string      `json:"apiEndpoint"`
}

type device struct {
	DeviceID            string                    `json:"deviceId"`
	SupportedInterfaces map[string]map[string]any `json:"supportedInterfaces"`
}

type viewport struct {
	Shape       string `json:"shape"`
	Mode        string `json:"mode"`
	PixelWidth  int    `json:"pixelWidth"`
	PixelHeight int    `json:"pixelHeight"`
	DPI         int    `json:"dpi"`
}

type requestBody struct {
	Type        string  `json:"type"`
	RequestID   string  `json:"requestId"`
	Timestamp   string  `json:"timestamp"`
	Locale      string  `json:"locale"`
	Intent      *intent `json:"intent,omitempty"`
	DialogState string  `json:"dialogState,omitempty"`
}

type intent struct {
	Name               string          `json:"name"`
	ConfirmationStatus string          `json:"confirmationStatus"`
	Slots              map[string]slot `json:"slots"`
}

type slot struct {
	Name               string       `json:"name"`
	Value              string       `json:"value,omitempty"`
	ConfirmationStatus string       `json:"confirmationStatus"`
	Resolutions        *resolutions `json:"resolutions,omitempty"`
}

type resolutions struct {
	PerAuthority []authority `json:"resolutionsPerAuthority"`
}

type authority struct {
	Authority string `json:"authority"`
	Status    struct {
		Code string `json:"code"`
	} `json:"status"`
	Values []resolvedValue `json:"values,omitempty"`
}

type resolvedValue struct {
	Value struct {
		Name string `json:"name"`
		ID   string `json:"id"`
	} `json:"value"`
}

// DefaultAPLVersion is the APL runtime an Echo Show declares by default.
const DefaultAPLVersion = "2024.3"

// Request builds the envelope for match at now: a LaunchRequest, or an
// IntentRequest with every slot of the intent (filled ones with their
// words and, for a custom slot type, an entity resolution: ER_SUCCESS_MATCH
// with the value's name and id, or ER_SUCCESS_NO_MATCH). The first request
// of a Device, and every launch, opens the session (session.new).
func (d *Device) Request(match Match, now time.Time) Request {
	d.defaults()
	newSession := d.turns == 0 || match.Launch
	d.turns++
	app := application{ApplicationID: d.SkillID}
	u := user{UserID: d.UserID}
	ifaces := map[string]map[string]any{}
	var vp *viewport
	if d.Screen {
		ifaces["Alexa.Presentation.APL"] = map[string]any{"runtime": map[string]any{"maxVersion": d.APLVersion}}
		vp = &viewport{Shape: "RECTANGLE", Mode: "HUB", PixelWidth: 1280, PixelHeight: 800, DPI: 160}
	}
	r := Request{
		Version: "1.0",
		Session: &session{New: newSession, SessionID: d.SessionID, Application: app, User: u},
		Context: requestContext{
			System:   system{Application: app, User: u, Device: device{DeviceID: d.DeviceID, SupportedInterfaces: ifaces}, APIEndpoint: d.Endpoint},
			Viewport: vp,
		},
		Request: requestBody{
			Type:      "LaunchRequest",
			RequestID: "amzn1.echo-api.request." + randomID(),
			Timestamp: now.UTC().Format(time.RFC3339),
			Locale:    d.Locale,
		},
	}
	if match.Launch {
		return r
	}
	r.Request.Type = "IntentRequest"
	r.Request.DialogState = "COMPLETED"
	in := &intent{Name: match.Intent, ConfirmationStatus: "NONE", Slots: map[string]slot{}}
	for name, v := range match.Slots {
		s := slot{Name: name, Value: v.Value, ConfirmationStatus: "NONE"}
		if v.Value != "" && v.Type != "" && v.Type != "AMAZON.NUMBER" {
			a := authority{Authority: "amzn1.er-authority.echo-sdk." + d.SkillID + "." + v.Type}
			if v.ResolvedID != "" {
				a.Status.Code = "ER_SUCCESS_MATCH"
				var rv resolvedValue
				rv.Value.Name, rv.Value.ID = v.ResolvedName, v.ResolvedID
				a.Values = []resolvedValue{rv}
			} else {
				a.Status.Code = "ER_SUCCESS_NO_MATCH"
			}
			s.Resolutions = &resolutions{PerAuthority: []authority{a}}
		}
		in.Slots[name] = s
	}
	r.Request.Intent = in
	return r
}

// JSON is the request's body bytes.
func (r Request) JSON() []byte {
	b, _ := json.Marshal(r) // only strings, bools, ints and maps of them
	return b
}

func (d *Device) defaults() {
	if d.UserID == "" {
		d.UserID = "amzn1.ask.account.unsay-cli"
	}
	if d.DeviceID == "" {
		d.DeviceID = "amzn1.ask.device.unsay-cli"
	}
	if d.SessionID == "" {
		d.SessionID = "amzn1.echo-api.session.unsay-cli-" + randomID()
	}
	if d.Locale == "" {
		d.Locale = "en-GB"
	}
	if d.APLVersion == "" {
		d.APLVersion = DefaultAPLVersion
	}
	if d.Endpoint == "" {
		d.Endpoint = "https://api.eu.amazonalexa.com"
	}
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
