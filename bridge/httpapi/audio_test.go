package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

func clipFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../store/seeddata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func clipBody(domain, audience, typ string, clip []byte) []byte {
	return writeBody(func(m map[string]any) {
		m["domain"], m["audience"], m["value"] = domain, audience, "A slower count from one to ten."
		m["audioType"], m["audio"] = typ, base64.StdEncoding.EncodeToString(clip)
	})
}

func TestWrite_Audio_SignedClipCommitsAndTheSignatureCoversItsBytes(t *testing.T) {
	f := newFixture(t)
	mp3 := clipFile(t, "exercise_clip.mp3")
	mp3[len(mp3)-1] ^= 0x33 // a new recording: same headers, other samples
	body := clipBody("exercise_clip", "user", "audio/mpeg", mp3)
	a := f.signed(body, f.now.Unix())
	if a.status != http.StatusCreated {
		t.Fatalf("signed clip: %d %s", a.status, a.body)
	}
	got := a.json(t)
	au, _ := got["audio"].(map[string]any)
	if au["mimeType"] != "audio/mpeg" || au["size"] != float64(len(mp3)) || au["alexa"] != true || au["durationMs"].(float64) < 8000 {
		t.Fatalf("answer's audio = %v", got["audio"])
	}
	rr, err := f.st.ReadAudio(context.Background(), everything, "care://ray/exercise_clip")
	if err != nil || !bytes.Equal(rr.Version.Audio.Data, mp3) {
		t.Fatalf("stored clip: %v", err)
	}
	// The signature covers the raw bytes: one base64 character changed
	// after signing is refused before anything is parsed.
	i := bytes.Index(body, []byte(`"audio":"`)) + len(`"audio":"`) + 400
	forged := append([]byte(nil), body...)
	forged[i] = map[bool]byte{true: 'A', false: 'B'}[forged[i] != 'A']
	seq := f.auditSeq()
	ts := f.now.Unix()
	b := f.do(http.MethodPost, "/write", forged, map[string]string{
		HeaderTimestamp: itoa(ts), HeaderSignature: SignWrite([]byte(writeSecret), ts, body),
	})
	if b.status != http.StatusUnauthorized {
		t.Fatalf("clip changed after signing: %d, want 401", b.status)
	}
	if row := f.oneAuditRow(seq); row.Reason != store.ReasonBadSignature {
		t.Fatalf("audit row = %+v", row)
	}
}

// Each refusal is 400 naming the field and saying what is wrong, audited
// invalid, nothing written; the twin of each is accepted.
func TestWrite_Audio_RefusalsNameTheFieldAndSayWhatWasFound(t *testing.T) {
	wav, mp3 := clipFile(t, "gait_note.wav"), clipFile(t, "exercise_clip.mp3")
	big := bytes.Repeat(mp3[:144], models.MaxAudioBytes/144+2) // Alexa frames, over 1 MiB
	for _, tc := range []struct {
		name, domain, audience, typ string
		clip                        []byte
		field, has                  string
	}{
		{"a WAV sent as MP3", "gait", "assistant", "audio/mpeg", wav, "audio", "a WAV file (RIFF/WAVE), not the declared audio/mpeg"},
		{"the WAV sent as WAV (twin)", "gait", "assistant", "audio/wav", wav, "", ""},
		{"a speakable WAV", "exercise_clip", "user", "audio/wav", wav, "audio", "must be an MP3 that Alexa plays"},
		{"a speakable Alexa MP3 (twin)", "exercise_clip", "user", "audio/mpeg", mp3, "", ""},
		{"over 1 MiB", "gait2", "assistant", "audio/mpeg", big, "audio", "at most 1048576 bytes"},
		{"an unknown type", "gait3", "assistant", "audio/ogg", mp3, "audioType", "audio/mpeg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			seq := f.auditSeq()
			a := f.signed(clipBody(tc.domain, tc.audience, tc.typ, tc.clip), f.now.Unix())
			if tc.field == "" {
				if a.status != http.StatusCreated {
					t.Fatalf("twin: %d %s", a.status, a.body)
				}
				return
			}
			m := a.json(t)
			if a.status != http.StatusBadRequest || m["field"] != tc.field || !strings.Contains(m["error"].(string), tc.has) {
				t.Fatalf("%d %v; want 400 %s %q", a.status, m, tc.field, tc.has)
			}
			if row := f.oneAuditRow(seq); row.Reason != store.ReasonInvalid || row.Outcome != store.OutcomeRefused {
				t.Fatalf("audit row = %+v", row)
			}
		})
	}
	f := newFixture(t)
	bad := writeBody(func(m map[string]any) { m["audioType"], m["audio"] = "audio/mpeg", "not base64!" })
	if a := f.signed(bad, f.now.Unix()); a.status != http.StatusBadRequest || a.json(t)["field"] != "audio" {
		t.Fatalf("bad base64: %d %s", a.status, a.body)
	}
}

func TestWrite_Audio_BodyCapIsTheTextCapPlusTheClip(t *testing.T) {
	f := newFixture(t)
	over := bytes.Repeat([]byte("A"), MaxAudioWriteBody)
	body := writeBody(func(m map[string]any) { m["audioType"], m["audio"] = "audio/mpeg", string(over) })
	if a := f.signed(body, f.now.Unix()); a.status != http.StatusRequestEntityTooLarge || !strings.Contains(string(a.body), "1048576") {
		t.Fatalf("over the audio cap: %d %s", a.status, a.body)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
