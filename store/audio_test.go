package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// mp3Frames builds n Layer III frames with the given header fields and
// silent payloads: version bits (3 MPEG-1, 2 MPEG-2, 0 MPEG-2.5), bit rate
// index and sample rate index. Only the headers matter to InspectAudio.
func mp3Frames(t testing.TB, versionBits, bitrateIdx, rateIdx uint32, n int) []byte {
	t.Helper()
	h := uint32(0x7FF)<<21 | versionBits<<19 | 1<<17 | 1<<16 | bitrateIdx<<12 | rateIdx<<10 | 3<<6
	fh, err := parseMP3Header(h)
	if err != nil {
		t.Fatalf("test frame header: %v", err)
	}
	var b []byte
	for range n {
		frame := make([]byte, fh.length)
		binary.BigEndian.PutUint32(frame, h)
		b = append(b, frame...)
	}
	return b
}

// alexaMP3 is 2 s of MPEG-2 Layer III at 48 kbps, 24000 Hz: what Alexa plays.
func alexaMP3(t testing.TB) []byte { return mp3Frames(t, 2, 6, 1, 84) }

func clipIn(domain string, a models.Audience, typ string, b []byte) PublishInput {
	pi := in(domain, a, "A slow count from one to ten.")
	pi.AudioType, pi.Audio = typ, b
	return pi
}

func TestInspectAudio_TheCommittedSeedClips(t *testing.T) {
	mp3, err := InspectAudio(models.AudioMPEG, seedExerciseClip)
	if err != nil {
		t.Fatalf("exercise_clip.mp3: %v", err)
	}
	if mp3.MPEGVersion != 2 || mp3.Bitrate != 48000 || mp3.SampleRate != 24000 || !mp3.AlexaPlayable ||
		mp3.Duration < 8*time.Second || mp3.Duration > 10*time.Second {
		t.Fatalf("exercise_clip.mp3 = %+v; want MPEG-2, 48 kbps, 24000 Hz, about 9 s, Alexa-playable", mp3)
	}
	wav, err := InspectAudio(models.AudioWAV, seedGaitNote)
	if err != nil {
		t.Fatalf("gait_note.wav: %v", err)
	}
	if wav.SampleRate != 8000 || wav.BitsPerSample != 8 || wav.Channels != 1 || wav.AlexaPlayable ||
		wav.Duration < 2500*time.Millisecond || wav.Duration > 3200*time.Millisecond {
		t.Fatalf("gait_note.wav = %+v; want 8000 Hz, 8 bits, mono, about 2.9 s, not for Alexa", wav)
	}
}

// Each refusal has its twin: the nearest input that is accepted.
func TestValidate_Audio_ContainerTypeSizeAndAlexaRules(t *testing.T) {
	mp3 := alexaMP3(t)
	mpeg1 := mp3Frames(t, 3, 9, 0, 40) // MPEG-1, 128 kbps, 44100 Hz
	big := mp3Frames(t, 2, 6, 1, models.MaxAudioBytes/144+2)
	random := bytes.Repeat([]byte("not audio at all "), 100)
	for _, tc := range []struct {
		name       string
		in         PublishInput
		field, has string // "" field: accepted
		wantType   string
	}{
		{"a WAV labelled MP3", clipIn("gait", models.AudienceAssistant, "audio/mpeg", seedGaitNote), "audio", "a WAV file (RIFF/WAVE), not the declared audio/mpeg", ""},
		{"the WAV labelled WAV", clipIn("gait", models.AudienceAssistant, "audio/wav", seedGaitNote), "", "", models.AudioWAV},
		{"an MP3 labelled WAV", clipIn("gait", models.AudienceAssistant, "audio/wav", mp3), "audio", "an MP3 file (MPEG audio frames), not the declared audio/wav", ""},
		{"the MP3 labelled with an alias", clipIn("gait", models.AudienceAssistant, "audio/mp3", mp3), "", "", models.AudioMPEG},
		{"the WAV labelled with an alias", clipIn("gait", models.AudienceAssistant, "audio/x-wav", seedGaitNote), "", "", models.AudioWAV},
		{"text labelled MP3", clipIn("gait", models.AudienceAssistant, "audio/mpeg", random), "audio", "not a valid MP3 file", ""},
		{"a truncated MP3", clipIn("gait", models.AudienceAssistant, "audio/mpeg", mp3[:len(mp3)-10]), "audio", "truncated", ""},
		{"a truncated WAV", clipIn("gait", models.AudienceAssistant, "audio/wav", seedGaitNote[:len(seedGaitNote)-100]), "audio", "truncated", ""},
		{"an unknown type", clipIn("gait", models.AudienceAssistant, "audio/ogg", mp3), "audioType", "audio/mpeg", ""},
		{"a type without bytes", clipIn("gait", models.AudienceAssistant, "audio/mpeg", nil), "audio", "no audio bytes", ""},
		{"bytes without a type", clipIn("gait", models.AudienceAssistant, "", mp3), "audioType", "must be set", ""},
		{"over 1 MiB", clipIn("gait", models.AudienceAssistant, "audio/mpeg", big), "audio", "at most 1048576 bytes", ""},
		{"a speakable WAV", clipIn("exercise_clip", models.AudienceUser, "audio/wav", seedGaitNote), "audio", "a speakable clip must be an MP3 that Alexa plays", ""},
		{"a speakable MPEG-1 MP3", clipIn("exercise_clip", models.AudienceUser, "audio/mpeg", mpeg1), "audio", "MPEG-1 Layer III, 128 kbps, 44100 Hz", ""},
		{"the MPEG-1 MP3 for the assistant", clipIn("gait", models.AudienceAssistant, "audio/mpeg", mpeg1), "", "", models.AudioMPEG},
		{"a speakable Alexa MP3", clipIn("exercise_clip", models.AudienceUser, "audio/mpeg", mp3), "", "", models.AudioMPEG},
		{"the committed clip", clipIn("exercise_clip", models.AudienceUser, "audio/mpeg", seedExerciseClip), "", "", models.AudioMPEG},
		{"no audio at all", in("exercise", models.AudienceUser, "Ankle pumps."), "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Validate(tc.in)
			if tc.field == "" {
				if err != nil || out.AudioType != tc.wantType {
					t.Fatalf("Validate = %q, %v; want accepted as %q", out.AudioType, err, tc.wantType)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) || ve.Field != tc.field || !strings.Contains(ve.Reason, tc.has) {
				t.Fatalf("Validate = %v; want %s refused with %q", err, tc.field, tc.has)
			}
			if strings.Contains(ve.Reason, "not audio at all") {
				t.Fatal("the refusal echoes the bytes")
			}
		})
	}
	// The Alexa refusal tells the clinician how to convert.
	_, err := Validate(clipIn("exercise_clip", models.AudienceUser, "audio/wav", seedGaitNote))
	if err == nil || !strings.Contains(err.Error(), "lame -b 48") {
		t.Fatalf("the refusal of a speakable WAV names no conversion: %v", err)
	}
}

// The pinned vector is computed from its definition written out literally:
// prevHash ‖ {"audioSha256":…,"mimeType":…,"text":…} ‖ writtenAt ‖ authorId.
func TestAudioVersionHash_CoversTheBytesAndLeavesTextHashesAlone(t *testing.T) {
	at := time.Date(2026, 10, 7, 13, 14, 0, 0, time.UTC)
	clip := []byte("pretend these are MP3 bytes")
	sum := sha256.Sum256(clip)
	digest := hex.EncodeToString(sum[:])
	pre := "ab12" + `{"audioSha256":"` + digest + `","mimeType":"audio/mpeg","text":"Count \"ten\"."}` + "2026-10-07T13:14:00.000Z" + "okafor"
	want := sha256.Sum256([]byte(pre))
	if got := AudioVersionHash("ab12", `Count "ten".`, models.AudioMPEG, digest, at, "okafor"); got != hex.EncodeToString(want[:]) {
		t.Fatalf("AudioVersionHash = %s, want %x (the literal preimage)", got, want)
	}
	flipped := append([]byte(nil), clip...)
	flipped[3] ^= 1
	if AudioVersionHash("ab12", `Count "ten".`, models.AudioMPEG, sha256Hex(flipped), at, "okafor") == hex.EncodeToString(want[:]) {
		t.Fatal("a flipped byte of the clip leaves the hash unchanged")
	}
	// A text-only version is hashed as before: the pinned vector (P-5).
	text := models.Version{Value: "No weight through the operated leg; transfers with the frame only.", WrittenAt: at, AuthorID: "adeyemi"}
	if hashOf(text) != VersionHash("", text.Value, at, "adeyemi") {
		t.Fatal("hashOf a text version is not VersionHash")
	}
}

func TestPublish_Audio_ReadAudioServesTheBytesTheChainHashCovers(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	res := mustPublish(t, s, writer, clipIn("exercise_clip", models.AudienceUser, "audio/mpeg", seedExerciseClip))
	v := res.Version
	if v.Audio == nil || v.Hash != AudioVersionHash("", v.Value, models.AudioMPEG, sha256Hex(seedExerciseClip), v.WrittenAt, v.AuthorID) {
		t.Fatalf("published clip's hash does not cover its bytes: %+v", v)
	}
	rr, err := s.ReadAudio(ctx, userRay, "care://ray/exercise_clip")
	if err != nil {
		t.Fatal(err)
	}
	a := rr.Version.Audio
	if a == nil || !bytes.Equal(a.Data, seedExerciseClip) || a.MIMEType != models.AudioMPEG || a.Size != len(seedExerciseClip) ||
		a.SHA256 != sha256Hex(seedExerciseClip) || !a.AlexaPlayable || a.Duration < 8*time.Second {
		t.Fatalf("ReadAudio = %+v", a)
	}
	// Read and List carry what the clip is, without its bytes.
	plain, err := s.Read(ctx, userRay, "care://ray/exercise_clip")
	if err != nil || plain.Version.Audio == nil || plain.Version.Audio.Data != nil || plain.Version.Audio.Size != len(seedExerciseClip) {
		t.Fatalf("Read = %+v, %v; want the clip's type and size without its bytes", plain.Version.Audio, err)
	}
	facts, _ := s.List(ctx, userRay)
	if len(facts) != 1 || facts[0].Current.Audio == nil || facts[0].Current.Audio.MIMEType != models.AudioMPEG {
		t.Fatalf("List = %+v", facts)
	}
	// The same clip again is unchanged; one byte more or less is a new version.
	if again := mustPublish(t, s, writer, clipIn("exercise_clip", models.AudienceUser, "audio/mpeg", seedExerciseClip)); !again.Unchanged {
		t.Fatalf("the same clip again: %+v, want Unchanged", again)
	}
	other := append([]byte(nil), seedExerciseClip...)
	other[len(other)-1] ^= 0x55 // payload, not a header
	if next := mustPublish(t, s, writer, clipIn("exercise_clip", models.AudienceUser, "audio/mpeg", other)); next.Unchanged || next.Version.N != 2 {
		t.Fatalf("a different clip with the same words: %+v, want version 2", next)
	}
	// A text write to the same fact drops the clip, in a new version.
	text := mustPublish(t, s, writer, in("exercise_clip", models.AudienceUser, "A slow count from one to ten."))
	if text.Version.N != 3 || text.Version.Audio != nil {
		t.Fatalf("a text write after a clip: %+v", text.Version)
	}
	if r, _ := s.ReadAudio(ctx, userRay, "care://ray/exercise_clip/v2"); r.Version.Audio == nil || !bytes.Equal(r.Version.Audio.Data, other) {
		t.Fatal("version 2's clip is not readable by its /v2 URI")
	}
	if vr, err := s.Verify(ctx, userRay, "care://ray/exercise_clip"); err != nil || !vr.Intact {
		t.Fatalf("Verify = %+v, %v", vr, err)
	}
}

// P-1, P-2 for blobs: the same two checks and the same not-found as text.
func TestReadAudio_P1_P2_AssistantClipIsNotFoundForAUserPrincipalLikeText(t *testing.T) {
	s := seeded(t)
	ctx := context.Background()
	for _, uri := range []string{"care-internal://ray/gait_note", "care://ray/gait_note", "care-internal://ray/gait_note/v2",
		"care://ray/gait_note/v2", "care-internal://ray/risk", "care://ray/nothing", "care://ray/gait_note/"} {
		_, audioErr := s.ReadAudio(ctx, userRay, uri)
		_, textErr := s.Read(ctx, userRay, uri)
		if !errors.Is(audioErr, ErrNotFound) || audioErr != textErr {
			t.Fatalf("%s for a user principal: ReadAudio %v, Read %v; want the same ErrNotFound", uri, audioErr, textErr)
		}
	}
	// The twins: the speakable clip's bytes for the user principal, the
	// assistant's clip for a principal holding care.read.assistant.
	r, err := s.ReadAudio(ctx, userRay, "care://ray/exercise_clip")
	if err != nil || r.Version.Audio == nil || !bytes.Equal(r.Version.Audio.Data, seedExerciseClip) {
		t.Fatalf("user ReadAudio exercise_clip = %v", err)
	}
	g, err := s.ReadAudio(ctx, dualRay, "care-internal://ray/gait_note")
	if err != nil || g.Version.Audio == nil || !bytes.Equal(g.Version.Audio.Data, seedGaitNote) || g.Version.Audio.MIMEType != models.AudioWAV {
		t.Fatalf("dual ReadAudio gait_note = %v", err)
	}
	if _, err := s.ReadAudio(ctx, dualOther, "care-internal://ray/gait_note"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another patient's principal: %v, want ErrNotFound (P-21)", err)
	}
}

// sqliteFiles returns the bytes of the SQLite database at path and its WAL.
func sqliteFiles(t *testing.T, path string) []byte {
	t.Helper()
	var all []byte
	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

func TestSeal_P6_GaitNoteBytesAreAbsentFromTheSQLiteFileUnderAnEnvelope(t *testing.T) {
	ctx := context.Background()
	window := seedGaitNote[len(seedGaitNote)/2 : len(seedGaitNote)/2+64] // 64 bytes of its samples
	count := seedExerciseClip[1000:1064]
	for _, tc := range []struct {
		name    string
		sealer  Sealer
		present bool
	}{{"plaintext store (the twin)", nil, true}, {"sealed store", newGCMSealer(t, 7), false}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "clips.db")
			s, err := Open(ctx, Options{DSN: path, AuditKey: []byte("test-audit-key"), Sealer: tc.sealer})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Seed(ctx, s, demoNow(t)); err != nil {
				t.Fatal(err)
			}
			g, err := s.ReadAudio(ctx, dualRay, "care-internal://ray/gait_note")
			if err != nil || !bytes.Equal(g.Version.Audio.Data, seedGaitNote) {
				t.Fatalf("ReadAudio gait_note = %v", err)
			}
			s.Close()
			file := sqliteFiles(t, path)
			if got := bytes.Contains(file, window); got != tc.present {
				t.Fatalf("gait_note's samples in the database file: %v, want %v", got, tc.present)
			}
			if got := bytes.Contains(file, count); got != tc.present {
				t.Fatalf("exercise_clip's frames in the database file: %v, want %v", got, tc.present)
			}
		})
	}
}

func TestSeal_P6_ClipSealedUnderItsRecordsAAD(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sealed.db")
	sl := newGCMSealer(t, 3)
	s := openSealed(t, path, sl)
	ctx := context.Background()
	mustPublish(t, s, writer, clipIn("exercise_clip", models.AudienceUser, "audio/mpeg", alexaMP3(t)))
	mustPublish(t, s, writer, clipIn("gait", models.AudienceAssistant, "audio/wav", seedGaitNote))
	// Moving the clip of one record onto another fails to open there.
	tamper(t, path, `UPDATE versions SET audio = (SELECT audio FROM versions WHERE domain = 'gait') WHERE domain = 'exercise_clip'`)
	if _, err := s.ReadAudio(ctx, userRay, "care://ray/exercise_clip"); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadAudio of a clip moved from another record = %v; want an error that is not not-found", err)
	}
	vr, err := s.Verify(ctx, userRay, "care://ray/exercise_clip")
	if err != nil || vr.Intact || vr.BrokenAt != 1 || vr.Problem != "the clip does not open" {
		t.Fatalf("Verify = %+v, %v; want BrokenAt 1, the clip does not open", vr, err)
	}
	if vr, err := s.Verify(ctx, dualRay, "care-internal://ray/gait"); err != nil || !vr.Intact {
		t.Fatalf("the clip's own record: %+v, %v; want intact", vr, err)
	}
}

// `unsay verify` reads Store.Verify: a flipped byte of a stored clip is
// located at its version, and the clip is not served meanwhile.
func TestVerify_P5_AFlippedByteInAStoredClipIsLocated(t *testing.T) {
	s, path := openTest(t, nil)
	ctx := context.Background()
	if _, err := Seed(ctx, s, demoNow(t)); err != nil {
		t.Fatal(err)
	}
	before, err := s.Verify(ctx, userRay, "care://ray/exercise_clip")
	if err != nil || !before.Intact || len(before.Versions) != 2 {
		t.Fatalf("before: %+v, %v", before, err)
	}
	flipped := append([]byte(nil), seedExerciseClip...)
	flipped[len(flipped)/2] ^= 0x01
	q := `UPDATE versions SET audio = ? WHERE domain = 'exercise_clip' AND n = 2`
	if IsPostgresDSN(path) {
		q = strings.Replace(q, "?", "$1", 1)
	}
	tamper(t, path, q, flipped)
	after, err := s.Verify(ctx, userRay, "care://ray/exercise_clip")
	if err != nil || after.Intact || after.BrokenAt != 2 || after.Problem != "hash does not match" {
		t.Fatalf("after flipping a byte: %+v, %v; want BrokenAt 2, hash does not match", after, err)
	}
	if _, err := s.ReadAudio(ctx, userRay, "care://ray/exercise_clip"); !errors.Is(err, ErrAudioCorrupt) {
		t.Fatalf("ReadAudio of the flipped clip = %v, want ErrAudioCorrupt", err)
	}
	// Its text is still its text: Read (no bytes) serves the description.
	if r, err := s.Read(ctx, userRay, "care://ray/exercise_clip"); err != nil || r.Version.N != 2 {
		t.Fatalf("Read = %v", err)
	}
	if other, err := s.Verify(ctx, userRay, "care://ray/weight_bearing"); err != nil || !other.Intact {
		t.Fatalf("another chain: %+v, %v", other, err)
	}
}

func TestRekey_ResealsClipsWithTheirValues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rekey.db")
	ctx := context.Background()
	plain := openSealed(t, path, nil)
	if _, err := Seed(ctx, plain, demoNow(t)); err != nil {
		t.Fatal(err)
	}
	plain.Close()
	s := openSealed(t, path, newGCMSealer(t, 4))
	if _, err := s.Rekey(ctx); err != nil {
		t.Fatal(err)
	}
	g, err := s.ReadAudio(ctx, dualRay, "care-internal://ray/gait_note")
	if err != nil || !bytes.Equal(g.Version.Audio.Data, seedGaitNote) {
		t.Fatalf("ReadAudio after rekey = %v", err)
	}
	db := s.db
	var raw []byte
	if err := db.QueryRow(`SELECT audio FROM versions WHERE domain = 'gait_note' AND n = 2`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, seedGaitNote[100:164]) {
		t.Fatal("rekey left the clip in the clear")
	}
}

// BenchmarkReadAudio: a read of the seed's 54 kB clip with its hash
// recomputed over the bytes, against the same fact's text-only read.
func BenchmarkReadAudio(b *testing.B) {
	s, _ := openTest(b, nil)
	if _, err := Seed(context.Background(), s, time.Now()); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("ReadAudio", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.ReadAudio(ctx, userRay, "care://ray/exercise_clip"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Read", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Read(ctx, userRay, "care://ray/exercise_clip"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkInspectAudio: the container check of the seed's 9 s MP3 (375 frames).
func BenchmarkInspectAudio(b *testing.B) {
	for b.Loop() {
		if _, err := InspectAudio(models.AudioMPEG, seedExerciseClip); err != nil {
			b.Fatal(err)
		}
	}
}
