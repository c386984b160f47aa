package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/unsay/unsay/models"
)

// AudioInfo is what a clip's container headers say (InspectAudio).
type AudioInfo struct {
	MIMEType   string        // models.AudioMPEG or models.AudioWAV
	Duration   time.Duration // truncated to the millisecond
	SampleRate int           // Hz
	Channels   int
	// MP3 only: the MPEG version (1, 2, or 25 for 2.5), the layer (3), the
	// frame count, and the bit rate in bits per second when every frame
	// has the same one (0: variable).
	MPEGVersion int
	Layer       int
	Frames      int
	Bitrate     int
	// WAV only: bits per sample.
	BitsPerSample int
	// AlexaPlayable: an MP3 Alexa's SSML <audio> accepts — MPEG-2 Layer
	// III, every frame at 48 kbps, 16000/22050/24000 Hz, at most 240 s.
	AlexaPlayable bool
}

// audioTypes maps the MIME types a write may name to the one the store
// keeps: audio/mpeg (also audio/mp3) and audio/wav (also audio/x-wav,
// audio/wave, audio/vnd.wave).
var audioTypes = map[string]string{
	"audio/mpeg": models.AudioMPEG, "audio/mp3": models.AudioMPEG,
	"audio/wav": models.AudioWAV, "audio/x-wav": models.AudioWAV, "audio/wave": models.AudioWAV, "audio/vnd.wave": models.AudioWAV,
}

// NormalizeAudioType returns the store's MIME type for t (case-insensitive,
// parameters ignored), or "" when the store does not keep that type.
func NormalizeAudioType(t string) string {
	t, _, _ = strings.Cut(t, ";")
	return audioTypes[strings.ToLower(strings.TrimSpace(t))]
}

// alexaConvert is the command the refusal of a clip Alexa cannot play suggests.
const alexaConvert = "lame -b 48 --cbr -m m --resample 24 clip.wav clip.mp3"

// InspectAudio checks that b is a whole container of the MIME type t
// (models.AudioMPEG or models.AudioWAV, normalized) and reads its headers:
//
//   - audio/wav: "RIFF" size "WAVE", chunks that lie within the file, a
//     "fmt " chunk (PCM, IEEE float or extensible; 1–8 channels, 8000–
//     192000 Hz, 8/16/24/32 bits, consistent block align and byte rate)
//     before a non-empty "data" chunk;
//   - audio/mpeg: an optional ID3v2 tag, then MPEG audio Layer III frames
//     back to back to the end of the file (an ID3v1 tag may close it),
//     every frame of one MPEG version and sample rate, no free-format or
//     reserved bit rate.
//
// A refusal is a *ValidationError on field "audio" that says what was
// found — "the bytes are a WAV file (RIFF/WAVE), not MP3" — never the bytes.
func InspectAudio(t string, b []byte) (AudioInfo, error) {
	var (
		info AudioInfo
		err  error
	)
	switch t {
	case models.AudioWAV:
		info, err = inspectWAV(b)
	case models.AudioMPEG:
		info, err = inspectMP3(b)
	default:
		return AudioInfo{}, &ValidationError{Field: "audioType", Reason: `must be "audio/mpeg" (MP3) or "audio/wav"`}
	}
	if err != nil {
		reason := fmt.Sprintf("the bytes are not a valid %s file: %v", map[string]string{models.AudioWAV: "WAV", models.AudioMPEG: "MP3"}[t], err)
		if other := sniffAudio(b); other != "" && other != t {
			reason = fmt.Sprintf("the bytes are %s, not the declared %s; send them with audioType %q", describeType(other), t, other)
		}
		return AudioInfo{}, &ValidationError{Field: "audio", Reason: reason}
	}
	return info, nil
}

// sniffAudio names the container b starts like, or "".
func sniffAudio(b []byte) string {
	switch {
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WAVE":
		return models.AudioWAV
	case len(b) >= 3 && string(b[:3]) == "ID3":
		return models.AudioMPEG
	case len(b) >= 4:
		if _, err := parseMP3Header(binary.BigEndian.Uint32(b)); err == nil {
			return models.AudioMPEG
		}
	}
	return ""
}

func describeType(t string) string {
	if t == models.AudioWAV {
		return "a WAV file (RIFF/WAVE)"
	}
	return "an MP3 file (MPEG audio frames)"
}

// ---- WAV ----

func inspectWAV(b []byte) (AudioInfo, error) {
	if len(b) < 12 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return AudioInfo{}, fmt.Errorf(`no "RIFF….WAVE" header`)
	}
	riff := int64(binary.LittleEndian.Uint32(b[4:8]))
	if riff+8 > int64(len(b)) {
		return AudioInfo{}, fmt.Errorf("the RIFF header declares %d bytes but the file has %d (truncated?)", riff+8, len(b))
	}
	end := int(riff + 8)
	var (
		info    AudioInfo
		haveFmt bool
		blockSz int
		rate    int
	)
	for off := 12; off+8 <= end; {
		id := string(b[off : off+4])
		size := int64(binary.LittleEndian.Uint32(b[off+4 : off+8]))
		body := off + 8
		if int64(body)+size > int64(end) {
			return AudioInfo{}, fmt.Errorf("chunk %q runs past the end of the file", id)
		}
		switch id {
		case "fmt ":
			if size < 16 {
				return AudioInfo{}, fmt.Errorf(`"fmt " chunk of %d bytes`, size)
			}
			f := b[body : body+16]
			format := binary.LittleEndian.Uint16(f[0:2])
			info.Channels = int(binary.LittleEndian.Uint16(f[2:4]))
			info.SampleRate = int(binary.LittleEndian.Uint32(f[4:8]))
			rate = int(binary.LittleEndian.Uint32(f[8:12]))
			blockSz = int(binary.LittleEndian.Uint16(f[12:14]))
			info.BitsPerSample = int(binary.LittleEndian.Uint16(f[14:16]))
			switch {
			case format != 1 && format != 3 && format != 0xFFFE:
				return AudioInfo{}, fmt.Errorf("sample format %#04x is not PCM or IEEE float", format)
			case info.Channels < 1 || info.Channels > 8:
				return AudioInfo{}, fmt.Errorf("%d channels", info.Channels)
			case info.SampleRate < 8000 || info.SampleRate > 192000:
				return AudioInfo{}, fmt.Errorf("sample rate %d Hz", info.SampleRate)
			case info.BitsPerSample != 8 && info.BitsPerSample != 16 && info.BitsPerSample != 24 && info.BitsPerSample != 32:
				return AudioInfo{}, fmt.Errorf("%d bits per sample", info.BitsPerSample)
			case blockSz != info.Channels*info.BitsPerSample/8 || rate != info.SampleRate*blockSz:
				return AudioInfo{}, fmt.Errorf("inconsistent block align or byte rate")
			}
			haveFmt = true
		case "data":
			if !haveFmt {
				return AudioInfo{}, fmt.Errorf(`"data" before "fmt "`)
			}
			if size == 0 || size%int64(blockSz) != 0 {
				return AudioInfo{}, fmt.Errorf(`"data" chunk of %d bytes is not a whole number of samples`, size)
			}
			info.MIMEType = models.AudioWAV
			info.Duration = (time.Duration(size) * time.Second / time.Duration(rate)).Truncate(time.Millisecond)
			return info, nil
		}
		off = body + int(size) + int(size&1) // chunks are padded to an even size
	}
	return AudioInfo{}, fmt.Errorf(`no "data" chunk`)
}

// ---- MP3 ----

// mp3Header is one MPEG audio frame header.
type mp3Header struct {
	version    int // 1, 2, or 25 (2.5)
	layer      int // 3
	bitrate    int // bits per second
	sampleRate int // Hz
	channels   int
	length     int // the frame's bytes, header included
}

var (
	mp3BitratesV1L3 = [16]int{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, -1}
	mp3BitratesV2L3 = [16]int{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, -1}
	mp3Rates        = map[int][3]int{1: {44100, 48000, 32000}, 2: {22050, 24000, 16000}, 25: {11025, 12000, 8000}}
)

// parseMP3Header decodes a Layer III frame header (ISO/IEC 11172-3 §2.4.2.3,
// 13818-3 for MPEG-2 and the 2.5 extension).
func parseMP3Header(h uint32) (mp3Header, error) {
	if h>>21 != 0x7FF {
		return mp3Header{}, fmt.Errorf("no frame sync")
	}
	var fh mp3Header
	switch (h >> 19) & 3 {
	case 0:
		fh.version = 25
	case 2:
		fh.version = 2
	case 3:
		fh.version = 1
	default:
		return mp3Header{}, fmt.Errorf("reserved MPEG version")
	}
	if (h>>17)&3 != 1 {
		return mp3Header{}, fmt.Errorf("not Layer III")
	}
	fh.layer = 3
	bi, si := (h>>12)&0xF, (h>>10)&3
	table := mp3BitratesV2L3
	if fh.version == 1 {
		table = mp3BitratesV1L3
	}
	switch {
	case bi == 0:
		return mp3Header{}, fmt.Errorf("free-format bit rate")
	case bi == 15:
		return mp3Header{}, fmt.Errorf("reserved bit rate")
	case si == 3:
		return mp3Header{}, fmt.Errorf("reserved sample rate")
	}
	fh.bitrate = table[bi] * 1000
	fh.sampleRate = mp3Rates[fh.version][si]
	fh.channels = 2
	if (h>>6)&3 == 3 {
		fh.channels = 1
	}
	pad := int((h >> 9) & 1)
	coef := 144
	if fh.version != 1 {
		coef = 72
	}
	fh.length = coef*fh.bitrate/fh.sampleRate + pad
	return fh, nil
}

func inspectMP3(b []byte) (AudioInfo, error) {
	off := 0
	if len(b) >= 10 && string(b[:3]) == "ID3" {
		size := int(b[6]&0x7F)<<21 | int(b[7]&0x7F)<<14 | int(b[8]&0x7F)<<7 | int(b[9]&0x7F)
		off = 10 + size
		if b[5]&0x10 != 0 {
			off += 10 // footer
		}
		if off > len(b) {
			return AudioInfo{}, fmt.Errorf("the ID3v2 tag runs past the end of the file")
		}
	}
	end := len(b)
	if end-off >= 128 && string(b[end-128:end-125]) == "TAG" {
		end -= 128 // ID3v1
	}
	var (
		info     AudioInfo
		first    mp3Header
		samples  int64
		constant = true
	)
	for off < end {
		if end-off < 4 {
			return AudioInfo{}, fmt.Errorf("%d stray bytes after frame %d", end-off, info.Frames)
		}
		fh, err := parseMP3Header(binary.BigEndian.Uint32(b[off:]))
		if err != nil {
			return AudioInfo{}, fmt.Errorf("frame %d at byte %d: %v", info.Frames+1, off, err)
		}
		if info.Frames == 0 {
			first = fh
		} else if fh.version != first.version || fh.sampleRate != first.sampleRate {
			return AudioInfo{}, fmt.Errorf("frame %d changes the MPEG version or sample rate", info.Frames+1)
		}
		if fh.bitrate != first.bitrate {
			constant = false
		}
		if off+fh.length > end {
			return AudioInfo{}, fmt.Errorf("frame %d is truncated", info.Frames+1)
		}
		off += fh.length
		info.Frames++
		if fh.version == 1 {
			samples += 1152
		} else {
			samples += 576
		}
	}
	if info.Frames == 0 {
		return AudioInfo{}, fmt.Errorf("no MPEG audio frames")
	}
	info.MIMEType = models.AudioMPEG
	info.MPEGVersion, info.Layer, info.SampleRate, info.Channels = first.version, first.layer, first.sampleRate, first.channels
	if constant {
		info.Bitrate = first.bitrate
	}
	info.Duration = (time.Duration(samples) * time.Second / time.Duration(first.sampleRate)).Truncate(time.Millisecond)
	info.AlexaPlayable = info.MPEGVersion == 2 && info.Bitrate == models.AlexaAudioBitrate &&
		models.AlexaSampleRate(info.SampleRate) && info.Duration <= models.AlexaMaxAudio
	return info, nil
}

// describeMP3 says what an MP3 is, for a refusal: "MPEG-1 Layer III, 128
// kbps, 44100 Hz, 3.2 s".
func (i AudioInfo) describeMP3() string {
	v := fmt.Sprintf("MPEG-%d", i.MPEGVersion)
	if i.MPEGVersion == 25 {
		v = "MPEG-2.5"
	}
	br := "variable bit rate"
	if i.Bitrate > 0 {
		br = fmt.Sprintf("%d kbps", i.Bitrate/1000)
	}
	return fmt.Sprintf("%s Layer III, %s, %d Hz, %.1f s", v, br, i.SampleRate, i.Duration.Seconds())
}

// validateAudio is Validate's audio rule (see Validate). It returns the
// normalized MIME type and the container's headers.
func validateAudio(in PublishInput) (string, AudioInfo, error) {
	bad := func(field, reason string) (string, AudioInfo, error) {
		return "", AudioInfo{}, &ValidationError{Field: field, Reason: reason}
	}
	switch {
	case len(in.Audio) == 0 && in.AudioType == "":
		return "", AudioInfo{}, nil
	case len(in.Audio) == 0:
		return bad("audio", "audioType is set but there are no audio bytes")
	case in.AudioType == "":
		return bad("audioType", `must be set with audio: "audio/mpeg" (MP3) or "audio/wav"`)
	}
	t := NormalizeAudioType(in.AudioType)
	if t == "" {
		return bad("audioType", `must be "audio/mpeg" (MP3) or "audio/wav"`)
	}
	if len(in.Audio) > models.MaxAudioBytes {
		return bad("audio", fmt.Sprintf("must be at most %d bytes (1 MiB); this clip has %d", models.MaxAudioBytes, len(in.Audio)))
	}
	info, err := InspectAudio(t, in.Audio)
	if err != nil {
		return "", AudioInfo{}, err
	}
	if in.Audience == models.AudienceUser && !info.AlexaPlayable {
		what := "a WAV file"
		if t == models.AudioMPEG {
			what = info.describeMP3()
		}
		return bad("audio", fmt.Sprintf("a speakable clip must be an MP3 that Alexa plays — MPEG-2 Layer III, 48 kbps, "+
			"16000, 22050 or 24000 Hz, at most %d s — and this one is %s; convert it, e.g. %s",
			int(models.AlexaMaxAudio/time.Second), what, alexaConvert))
	}
	return t, info, nil
}

// audioOf returns the models.Audio the version written from in carries
// (nil for a text-only write), with its digest and no URL.
func audioOf(in PublishInput) *models.Audio {
	if len(in.Audio) == 0 {
		return nil
	}
	return &models.Audio{MIMEType: in.AudioType, Size: len(in.Audio), Duration: in.audioInfo.Duration,
		SHA256: sha256Hex(in.Audio), AlexaPlayable: in.audioInfo.AlexaPlayable, Data: in.Audio}
}

// sameAudio reports whether the write's audio equals the stored bytes b of
// type t (both absent: true).
func sameAudio(in PublishInput, t string, b []byte) bool {
	return in.AudioType == t && bytes.Equal(in.Audio, b)
}
