package main

import (
	"bufio"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/unsay/unsay/skill/alexatest"
)

// The ids and certificate URL the peer's gen.js puts in its bodies.
const (
	peerCertURL = "https://s3.amazonaws.com/echo.api/echo-api-cert-12.pem"
	peerSkillID = "amzn1.ask.skill.5f0c2a51-7c0e-4d2b-9a34-0b1e6d6a2f11"
	peerUserID  = "amzn1.ask.account.AF3K7QZ2WZ5ZL3GZ6NHBQ4YVPO7U3X2L4Q2M6B5JTRLXQX7C3E5G2YH4V7KXQ6ZFQZL5XWJ2MCT3E6YH6ZQ7WQ5UJ3PFVGR2OL4Y3C2"
	peerDevice  = "amzn1.ask.device.AGXW5KJ3ZZQ3Q6F6QWXL2N5K3UZD2KZ6V3XHP4L2B6U7QZ3KC5ZJ2GQ5XHT3YF7W6ZK2M4Q3N5B2L7D5ZKCQ2XH3B"
)

// certSet is the test PKI both servers trust and the signer of the bodies.
type certSet struct {
	skillID, url, root, chain string
	sign                      func(body []byte) string
}

// alexaCerts uses the peer's test PKI (node gen.js certs) when Node is
// there, so both servers verify the same chain; otherwise a throwaway one
// from skill/alexatest (the product alone is measured then).
func alexaCerts(ctx context.Context, o options, node bool) (certSet, error) {
	if node {
		dir := filepath.Join(o.peers, "alexa-node")
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "ask-sdk-express-adapter")); err != nil {
			// The peer's packages, as its run.sh installs them (first run only).
			npm := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
			npm.Dir = dir
			if out, err := npm.CombinedOutput(); err != nil {
				return certSet{}, fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out)
			}
		}
		cmd := exec.CommandContext(ctx, "node", "gen.js", "certs")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return certSet{}, fmt.Errorf("node gen.js certs: %w\n%s", err, out)
		}
		certs := filepath.Join(dir, "certs")
		b, err := os.ReadFile(filepath.Join(certs, "leaf.key"))
		if err != nil {
			return certSet{}, err
		}
		key, err := parseRSAKey(b)
		if err != nil {
			return certSet{}, fmt.Errorf("%s: %w", filepath.Join(certs, "leaf.key"), err)
		}
		return certSet{skillID: peerSkillID, url: peerCertURL, root: filepath.Join(certs, "root.pem"),
			chain: filepath.Join(certs, "chain.pem"), sign: func(body []byte) string {
				h := sha256.Sum256(body)
				sig, _ := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, h[:])
				return base64.StdEncoding.EncodeToString(sig)
			}}, nil
	}
	p, err := alexatest.NewPKI()
	if err != nil {
		return certSet{}, err
	}
	dir, err := os.MkdirTemp("", "unsay-bench-pki-")
	if err != nil {
		return certSet{}, err
	}
	root, chain, err := p.WriteFiles(dir)
	if err != nil {
		return certSet{}, err
	}
	return certSet{skillID: peerSkillID, url: alexatest.CertURL, root: root, chain: chain, sign: p.Sign}, nil
}

func parseRSAKey(b []byte) (*rsa.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM block")
	}
	if k, err := x509.ParsePKCS1PrivateKey(blk.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("not an RSA key")
	}
	return rk, nil
}

// launchBody is an Echo-like LaunchRequest of the peer's shape and size
// (gen.js launchBody: 2,171 B, most of it the apiAccessToken; no APL).
func launchBody(now time.Time) []byte {
	rnd := func(n int) string {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	uuid := func() string {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	}
	app := map[string]any{"applicationId": peerSkillID}
	user := map[string]any{"userId": peerUserID}
	type obj = map[string]any
	b, _ := json.Marshal(obj{
		"version": "1.0",
		"session": obj{"new": true, "sessionId": "amzn1.echo-api.session." + uuid(), "application": app, "attributes": obj{}, "user": user},
		"context": obj{"System": obj{"application": app, "user": user,
			"device":         obj{"deviceId": peerDevice, "supportedInterfaces": obj{}},
			"apiEndpoint":    "https://api.eu.amazonalexa.com",
			"apiAccessToken": "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ." + rnd(560) + "." + rnd(256)}},
		"request": obj{"type": "LaunchRequest", "requestId": "amzn1.echo-api.request." + uuid(), "locale": "en-GB",
			"timestamp": now.UTC().Format("2006-01-02T15:04:05Z"), "shouldLinkResultBeReturned": false},
	})
	return b
}

type signed struct {
	body []byte
	hdr  http.Header
}

func signBodies(certs certSet, n int) []signed {
	out := make([]signed, n)
	for i := range out {
		b := launchBody(time.Now())
		h := http.Header{}
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("Signature-256", certs.sign(b))
		h.Set("SignatureCertChainUrl", certs.url)
		out[i] = signed{body: b, hdr: h}
	}
	return out
}

// startPeerAlexa runs the Node ASK SDK peer (server.js) on a free port.
func startPeerAlexa(ctx context.Context, o options) (url string, pid int, stop func(), err error) {
	cmd := exec.Command("node", "server.js", "0")
	cmd.Dir = filepath.Join(o.peers, "alexa-node")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", 0, nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	stop = func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }
	sc := bufio.NewScanner(out)
	port := make(chan string, 1)
	go func() {
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "LISTENING" {
				port <- f[1]
			}
		}
	}()
	select {
	case p := <-port:
		return "http://127.0.0.1:" + p + "/alexa", cmd.Process.Pid, stop, nil
	case <-time.After(20 * time.Second):
	case <-ctx.Done():
	}
	stop()
	return "", 0, nil, errors.New("node server.js did not print LISTENING within 20 s")
}

// alexaTarget is a fresh Alexa endpoint under test: the peer's or Unsay's.
type alexaTarget struct {
	url   string // the endpoint requests are POSTed to
	pid   int    // the server process, for its CPU time
	admin string // Unsay's admin listener (pprof); "" for the peer
	stop  func()
}

// startAlexaTarget starts side ("peer" or "unsay", the latter with
// --admin-pprof) as a fresh process.
func startAlexaTarget(ctx context.Context, o options, certs certSet, side string) (alexaTarget, error) {
	if side == "peer" {
		url, pid, stop, err := startPeerAlexa(ctx, o)
		return alexaTarget{url: url, pid: pid, stop: stop}, err
	}
	s, stop, err := startUnsayWith(ctx, o, certs, "--admin-pprof")
	if err != nil {
		return alexaTarget{}, err
	}
	return alexaTarget{url: s.URL + "/alexa", pid: s.PID(), admin: s.AdminURL, stop: stop}, nil
}

// profile saves /debug/pprof/{what} of an Unsay target into name under
// UNSAY_BENCH_PROFILE_DIR; without that variable, or for the peer, it
// does nothing.
func (t alexaTarget) profile(ctx context.Context, what, name string) {
	t.save(ctx, "/debug/pprof/"+what, name)
}

// save saves the admin listener's path (a profile, /metrics) of an Unsay
// target into name under UNSAY_BENCH_PROFILE_DIR, as profile does.
func (t alexaTarget) save(ctx context.Context, path, name string) {
	if pd := os.Getenv("UNSAY_BENCH_PROFILE_DIR"); pd != "" && t.admin != "" {
		saveProfile(ctx, t.admin+path, filepath.Join(pd, name))
	}
}

// counts reads the 200-answered requests per route from an Unsay target's
// admin /metrics (unsay_http_requests_total); nil for the peer or on
// failure.
func (t alexaTarget) counts(ctx context.Context) map[string]float64 {
	if t.admin == "" {
		return nil
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, t.admin+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), `unsay_http_requests_total{code="200",route="`)
		if !ok {
			continue
		}
		route, val, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(val, &v); err == nil {
			out[route] = v
		}
	}
	return out
}

// mcpPerLaunch is how many MCP requests (the speech principal's
// confirmation rounds: resources/list pages, reads) the server answered
// per Launch between two counts, -1 when unknown. Concurrent turns for one
// patient share a round (bridge/speech confirmflight.go), so this is what
// makes CPU per Launch depend on concurrency: every request of these runs
// is Ray's, so a closed loop at C=32 shares rounds that an open loop at a
// moderate rate (or Ray's own pace) does not.
func mcpPerLaunch(before, after map[string]float64) float64 {
	launches := after["/alexa"] - before["/alexa"]
	if before == nil || after == nil || launches <= 0 {
		return -1
	}
	return (after["/mcp"] - before["/mcp"]) / launches
}

// alexaOpen sends verified LaunchRequests at a constant rate (vegeta) to
// side, discards the warm-up, and records exact percentiles (the peers'
// rule: sorted[min(n-1, floor(p·n))]) and the server's CPU per request.
func alexaOpen(ctx context.Context, o options, certs certSet, side string, fig *Figures) error {
	t, err := startAlexaTarget(ctx, o, certs, side)
	if err != nil {
		return err
	}
	defer t.stop()
	url, pid := t.url, t.pid
	total := int(math.Ceil(float64(o.rate) * (o.warmup + o.openD).Seconds()))
	// Every request a distinct signed body (Unsay refuses a replayed
	// request id); the first proves the target verifies.
	bodies := signBodiesParallel(certs, 1+total)
	if err := checkOne(url, bodies[0]); err != nil {
		return err
	}
	bodies = bodies[1:]
	var i atomic.Uint64
	targeter := func(t *vegeta.Target) error {
		b := bodies[int(i.Add(1)-1)%len(bodies)]
		t.Method, t.URL, t.Body, t.Header = http.MethodPost, url, b.body, b.hdr
		return nil
	}
	atk := vegeta.NewAttacker(vegeta.KeepAlive(true), vegeta.Timeout(10*time.Second), vegeta.Workers(16), vegeta.Connections(64))
	rate := vegeta.Rate{Freq: o.rate, Per: time.Second}
	start := time.Now()
	var lat []time.Duration
	var ok, all int
	var cpu0 float64
	measuring := false
	var mStart time.Time
	var n0 map[string]float64
	for res := range atk.Attack(targeter, rate, o.warmup+o.openD, "alexa") {
		if !measuring && time.Since(start) >= o.warmup {
			measuring = true
			cpu0, _ = cpuSeconds(pid)
			mStart = time.Now()
			n0 = t.counts(ctx)
			go t.profile(ctx, fmt.Sprintf("profile?seconds=%d", max(1, int(o.openD.Seconds())-1)), "open.cpu.pprof")
		}
		if !measuring || res.Timestamp.Before(start.Add(o.warmup)) {
			continue
		}
		all++
		if res.Code == http.StatusOK {
			ok++
		}
		lat = append(lat, res.Latency)
	}
	cpu1, _ := cpuSeconds(pid)
	elapsed := time.Since(mStart).Seconds()
	fig.OpenMCPPerLaunch = mcpPerLaunch(n0, t.counts(ctx))
	t.save(ctx, "/metrics", "open.metrics.txt")   // requests per route: how many MCP requests the turns cost
	t.profile(ctx, "allocs", "open.allocs.pprof") // what the process allocated since it started (the warm-up included)
	if all == 0 {
		return errors.New("no requests measured")
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(math.Floor(p*float64(len(lat)))))]) / 1e6
	}
	fig.OpenP50, fig.OpenP99, fig.OpenMax = at(.5), at(.99), float64(lat[len(lat)-1])/1e6
	fig.OpenOK = float64(ok) / float64(all)
	fig.OpenCPUPerReqMs = (cpu1 - cpu0) / float64(all) * 1000
	fmt.Printf("    %s open loop %d req/s for %s: n=%d ok=%.4f p50 %.3f ms p99 %.3f ms max %.3f ms; server CPU %.3f ms/req (%.2f cores)%s\n",
		side, o.rate, o.openD, all, fig.OpenOK, fig.OpenP50, fig.OpenP99, fig.OpenMax, fig.OpenCPUPerReqMs, (cpu1-cpu0)/elapsed, perLaunch(fig.OpenMCPPerLaunch))
	if ok != all {
		return fmt.Errorf("%d of %d requests not answered 200 in time", all-ok, all)
	}
	return nil
}

// perLaunch prints an MCP-requests-per-Launch figure ("" when unknown).
func perLaunch(x float64) string {
	if x < 0 {
		return ""
	}
	return fmt.Sprintf("; %.2f MCP requests/Launch", x)
}

// checkOne proves the target verifies: the good request is 200 and the
// same body with one byte flipped is 400.
func checkOne(url string, s signed) error {
	post := func(body []byte) (int, error) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
		req.Header = s.hdr.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if c, err := post(s.body); err != nil || c != http.StatusOK {
		return fmt.Errorf("a good signed LaunchRequest answered %d (%v)", c, err)
	}
	bad := slices.Clone(s.body)
	i := strings.Index(string(bad), "LaunchRequest")
	bad[i] ^= 0x20
	if c, err := post(bad); err != nil || c != http.StatusBadRequest {
		return fmt.Errorf("a tampered LaunchRequest answered %d (%v), want 400", c, err)
	}
	return nil
}

// waitReady polls the admin /readyz until it answers 200 (the speech
// principal has its facts), up to 30 s.
func waitReady(ctx context.Context, admin string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return errors.New("the server was not ready within 30 s")
}

// Closed loop: wrk with the peer's script (test/peers/alexa-node/wrk/launch.lua)
// and the same distinct signed bodies for both servers. Unsay remembers each
// verified request id within Alexa's 150 s window and refuses one seen
// again (skill.ErrReplay), so the peer harness's 256 bodies sent round and
// round would measure refusals; here every request of a run is a new
// LaunchRequest, signed before the run (signing is not measured), and each
// server is a fresh process.

// wrkWarmup is the closed-loop warm-up, discarded (its own bodies).
const wrkWarmup = time.Second

func alexaWrk(ctx context.Context, o options, certs certSet, side string, fig *Figures) error {
	t, err := startAlexaTarget(ctx, o, certs, side)
	if err != nil {
		return err
	}
	defer t.stop()
	url, pid := t.url, t.pid
	dir, err := os.MkdirTemp("", "unsay-bench-wrk-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// Signed within Alexa's 150 s window of their use: on a busy machine
	// signing is slow, so the pool is only as large as the run needs.
	warm := o.wrkBodies / 10
	bodies := signBodiesParallel(certs, warm+o.wrkBodies)
	if err := checkOne(url, signBodies(certs, 1)[0]); err != nil {
		return err
	}
	warmFile, runFile := filepath.Join(dir, "warm.tsv"), filepath.Join(dir, "run.tsv")
	if err := writeWrkFile(warmFile, bodies[:warm]); err != nil {
		return err
	}
	if err := writeWrkFile(runFile, bodies[warm:]); err != nil {
		return err
	}
	script := filepath.Join(o.peers, "alexa-node", "wrk", "launch.lua")
	wrk := func(d time.Duration, file string) (map[string]float64, error) {
		cmd := exec.CommandContext(ctx, "wrk", "-t1", fmt.Sprintf("-c%d", o.c), fmt.Sprintf("-d%ds", int(d.Seconds())),
			"-s", script, url, "--", file)
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("wrk: %w", err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if j, ok := strings.CutPrefix(line, "WRK_JSON "); ok {
				var m map[string]float64
				if err := json.Unmarshal([]byte(j), &m); err != nil {
					return nil, fmt.Errorf("wrk summary: %w", err)
				}
				return m, nil
			}
		}
		return nil, errors.New("wrk printed no summary")
	}
	if _, err := wrk(wrkWarmup, warmFile); err != nil {
		return err
	}
	cpu0, _ := cpuSeconds(pid)
	n0 := t.counts(ctx)
	go t.profile(ctx, fmt.Sprintf("profile?seconds=%d", max(1, int(o.d.Seconds())-1)), "launch.cpu.pprof")
	go func() { // where requests wait, mid-run: a goroutine dump (what the CPU profile cannot show)
		select {
		case <-time.After(o.d / 2):
			t.profile(ctx, "goroutine?debug=1", "launch.goroutines.txt")
		case <-ctx.Done():
		}
	}()
	m, err := wrk(o.d, runFile)
	if err != nil {
		return err
	}
	cpu1, _ := cpuSeconds(pid)
	fig.WrkMCPPerLaunch = mcpPerLaunch(n0, t.counts(ctx))
	t.save(ctx, "/metrics", "launch.metrics.txt")
	t.profile(ctx, "allocs", "launch.allocs.pprof")
	secs := m["duration_us"] / 1e6
	fig.RPS = m["requests"] / secs
	fig.WrkP50, fig.WrkP99 = m["p50_us"]/1000, m["p99_us"]/1000
	fig.CPUPerReqMs = (cpu1 - cpu0) / m["requests"] * 1000
	errs := m["err_connect"] + m["err_read"] + m["err_write"] + m["err_status"] + m["err_timeout"]
	fmt.Printf("    %s wrk C=%d for %s, %d distinct bodies: %.0f requests, %.1f req/s, p50 %.3f ms p99 %.3f ms max %.3f ms; server CPU %.3f ms/req (%.2f cores)%s; %.0f errors\n",
		side, o.c, o.d, o.wrkBodies, m["requests"], fig.RPS, fig.WrkP50, fig.WrkP99, m["max_us"]/1000, fig.CPUPerReqMs, (cpu1-cpu0)/secs, perLaunch(fig.WrkMCPPerLaunch), errs)
	err = nil
	switch {
	case m["requests"] > float64(o.wrkBodies):
		err = fmt.Errorf("wrk sent %.0f requests but had %d distinct bodies: raise -wrk-bodies or shorten -d", m["requests"], o.wrkBodies)
	case errs > 0:
		err = fmt.Errorf("%.0f of %.0f requests failed or were not answered 2xx", errs, m["requests"])
	}
	if err != nil { // refusals (replays, errors) are fast: the run's figures would flatter
		fig.RPS, fig.WrkP50, fig.WrkP99, fig.CPUPerReqMs = 0, 0, 0, 0
	}
	return err
}

// signBodiesParallel signs n distinct LaunchRequests on every core.
func signBodiesParallel(certs certSet, n int) []signed {
	out := make([]signed, n)
	workers := max(1, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				out[i] = signBodies(certs, 1)[0]
			}
		}()
	}
	wg.Wait()
	return out
}

// writeWrkFile writes bodies in launch.lua's format: sig256 \t sig1 \t
// certUrl \t body (no SHA-1 signature: both servers check Signature-256).
func writeWrkFile(path string, bodies []signed) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, b := range bodies {
		fmt.Fprintf(w, "%s\t\t%s\t%s\n", b.hdr.Get("Signature-256"), b.hdr.Get("SignatureCertChainUrl"), b.body)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// saveProfile fetches a profile from the admin listener (--admin-pprof)
// into path (UNSAY_BENCH_PROFILE_DIR); a failure is printed, not fatal.
func saveProfile(ctx context.Context, url, path string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println("    profile:", err)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		fmt.Println("    profile:", err)
	}
}
