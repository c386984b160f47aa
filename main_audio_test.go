package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `unsay verify` locates a flipped byte of a stored clip at its version;
// the twin is the same database before the flip.
func TestVerify_LocatesAFlippedByteInAStoredClip(t *testing.T) {
	db := seededDB(t)
	if r := unsay(t, nil, "verify", "--db", db); r.code != 0 || !strings.Contains(r.stdout, "care://ray/exercise_clip intact (2 versions)") {
		t.Fatalf("before: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	conn, err := sql.Open("sqlite", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	var clip []byte
	if err := conn.QueryRow(`SELECT audio FROM versions WHERE domain = 'exercise_clip' AND n = 2`).Scan(&clip); err != nil || len(clip) < 1000 {
		t.Fatalf("stored clip: %d bytes, %v", len(clip), err)
	}
	clip[len(clip)/3] ^= 0x80
	if _, err := conn.Exec(`UPDATE versions SET audio = ? WHERE domain = 'exercise_clip' AND n = 2`, clip); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	r := unsay(t, nil, "verify", "--db", db)
	if r.code == 0 || !strings.Contains(r.stdout, "care://ray/exercise_clip BROKEN at v2 (2 versions): hash does not match") {
		t.Fatalf("after flipping a clip byte: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "care-internal://ray/gait_note intact") {
		t.Fatalf("the other clip's chain: %s", r.stdout)
	}
}

func TestWrite_AudioFileThatCannotBeReadOrTypedIsAUsageError(t *testing.T) {
	dir := t.TempDir()
	noExt := filepath.Join(dir, "clip")
	if err := os.WriteFile(noExt, []byte("ID3"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"write", "--url", "http://127.0.0.1:1", "--patient", "ray", "--domain", "exercise_clip", "--value", "A count.",
		"--author", "okafor", "--author-label", "Sarah Okafor, physio"}
	for _, tc := range []struct {
		file, want string
	}{{filepath.Join(dir, "missing.mp3"), "no such file"}, {noExt, "--audio-type audio/mpeg or audio/wav"}} {
		r := unsay(t, nil, append(base, "--audio", tc.file)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("--audio %s: exit %d, %q; want 2 and %q", tc.file, r.code, r.stderr, tc.want)
		}
	}
}
