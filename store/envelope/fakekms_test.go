package envelope_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeKMS is a local AWS KMS speaking the JSON 1.1 protocol
// (POST /, Content-Type application/x-amz-json-1.1, X-Amz-Target
// TrentService.GenerateDataKey | TrentService.Decrypt, base64 blobs). Like
// the real service it binds a wrapped data key to its encryption context and
// its KMS key: the blob is keyIndex ‖ nonce ‖ AES-GCM(kmsKey, dataKey,
// aad = canonical encryption context).
type fakeKMS struct {
	srv  *httptest.Server
	mu   sync.Mutex
	keys []fakeKey // index is the first byte of every blob

	failing  atomic.Bool // answer every call with 500 KMSInternalException
	generate atomic.Int64
	decrypt  atomic.Int64
	lastCtx  atomic.Value // map[string]string of the last GenerateDataKey
	unsigned atomic.Int64 // requests without a SigV4 Authorization header
}

type fakeKey struct {
	arn, id string
	aead    cipher.AEAD
}

func newFakeKMS(t testing.TB) *fakeKMS {
	t.Helper()
	f := &fakeKMS{}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// addKey creates a symmetric KMS key and returns its ARN; UNSAY_KMS_KEY_ID
// may name it by ARN, key id or "alias/"+name.
func (f *fakeKMS) addKey(t testing.TB, name string) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	id := fmt.Sprintf("1234abcd-0000-4000-8000-%012d", len(f.keys))
	arn := "arn:aws:kms:eu-west-2:111122223333:key/" + id
	f.keys = append(f.keys, fakeKey{arn: arn, id: name, aead: aead})
	return arn
}

func (f *fakeKMS) resolve(keyID string) (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, k := range f.keys {
		if keyID == k.arn || keyID == "alias/"+k.id || strings.HasSuffix(k.arn, "/"+keyID) {
			return i, true
		}
	}
	return 0, false
}

func canonicalContext(ec map[string]string) []byte {
	keys := make([]string, 0, len(ec))
	for k := range ec {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "%d:%s%d:%s", len(k), k, len(ec[k]), ec[k])
	}
	return b.Bytes()
}

func kmsError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
}

func (f *fakeKMS) serve(w http.ResponseWriter, r *http.Request) {
	if f.failing.Load() {
		kmsError(w, http.StatusInternalServerError, "KMSInternalException", "fake outage")
		return
	}
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-amz-json-1.1" {
		kmsError(w, http.StatusBadRequest, "SerializationException", "want POST application/x-amz-json-1.1")
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		f.unsigned.Add(1)
		kmsError(w, http.StatusBadRequest, "MissingAuthenticationTokenException", "unsigned")
		return
	}
	var in struct {
		KeyId             string
		KeySpec           string
		CiphertextBlob    []byte
		EncryptionContext map[string]string
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		kmsError(w, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	switch r.Header.Get("X-Amz-Target") {
	case "TrentService.GenerateDataKey":
		f.generate.Add(1)
		f.lastCtx.Store(in.EncryptionContext)
		i, ok := f.resolve(in.KeyId)
		if !ok {
			kmsError(w, http.StatusBadRequest, "NotFoundException", "no such key")
			return
		}
		if in.KeySpec != "AES_256" {
			kmsError(w, http.StatusBadRequest, "ValidationException", "KeySpec")
			return
		}
		dk := make([]byte, 32)
		_, _ = rand.Read(dk)
		nonce := make([]byte, 12)
		_, _ = rand.Read(nonce)
		k := f.keys[i]
		blob := append([]byte{byte(i)}, nonce...)
		blob = k.aead.Seal(blob, nonce, dk, canonicalContext(in.EncryptionContext))
		_ = json.NewEncoder(w).Encode(map[string]any{"CiphertextBlob": blob, "Plaintext": dk, "KeyId": k.arn})
	case "TrentService.Decrypt":
		f.decrypt.Add(1)
		b := in.CiphertextBlob
		if len(b) < 1+12+16 || int(b[0]) >= len(f.keys) {
			kmsError(w, http.StatusBadRequest, "InvalidCiphertextException", "")
			return
		}
		if in.KeyId != "" {
			if i, ok := f.resolve(in.KeyId); !ok || i != int(b[0]) {
				kmsError(w, http.StatusBadRequest, "IncorrectKeyException", "")
				return
			}
		}
		k := f.keys[b[0]]
		dk, err := k.aead.Open(nil, b[1:13], b[13:], canonicalContext(in.EncryptionContext))
		if err != nil {
			kmsError(w, http.StatusBadRequest, "InvalidCiphertextException", "")
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"Plaintext": dk, "KeyId": k.arn, "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"})
	default:
		kmsError(w, http.StatusBadRequest, "UnknownOperationException", r.Header.Get("X-Amz-Target"))
	}
}
