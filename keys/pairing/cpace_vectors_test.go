package pairing

import (
	"bytes"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
)

// The ristretto255 / SHA-512 test vectors of draft-irtf-cfrg-cpace-21,
// copied verbatim in testdata/cpace-ristretto255-vectors.txt (with its
// provenance). Each hex string below is checked to occur in that file, so
// a typo here cannot make a test pass.
const vectorsFile = "testdata/cpace-ristretto255-vectors.txt"

var draft21 = struct {
	prs, ci, sid, genString, genHash, g          string
	ya, ada, yaEnc, yb, adb, ybEnc, k            string
	transcriptIR, iskInput, iskIR                string
	s, x, sx, invalid1, invalid2, ciDraft18, g18 string
}{
	prs:       "50617373776f7264", // "Password"
	ci:        "0b415f696e69746961746f720b425f726573706f6e646572",
	sid:       "7e4b4791d6a8ef019b936c79fb7f2c57",
	genString: "11435061636552697374726574746f3235350850617373776f726464" + strings.Repeat("00", 100) + "180b415f696e69746961746f720b425f726573706f6e646572107e4b4791d6a8ef019b936c79fb7f2c57",
	genHash:   "da6d3ddc8802fca9058755ffd3ebde08a9c2c74945901a258482a288b6663af06bf645c93cd1c51512307199c80e84908916d983b34af77205f90851a657ee27",
	g:         "222b6b195fe84b1652badb6f6a3ae3d24341e7306967f0b8115b40d5698c7e56",
	ya:        "da3d23700a9e5699258aef94dc060dfda5ebb61f02a5ea77fad53f4ff0976d08",
	ada:       "414461", // "ADa"
	yaEnc:     "d6bac480f2c386c394efc7c47adb9925dcd2630b64f240c50f8d0eec482b9157",
	yb:        "d2316b454718c35362d83d69df6320f38578ed5984651435e2949762d900b80d",
	adb:       "414462", // "ADb"
	ybEnc:     "3ea7e0b19560d7c0b0f5734f63b955286dfa8232b5ebe63324e2d9e7433f7258",
	k:         "80b69a8a76457ab6a4d7f887a4bf6b55a2f80ac19c333f917a05fc9887c8b40f",
	transcriptIR: "20d6bac480f2c386c394efc7c47adb9925dcd2630b64f240c50f8d0eec482b915703414461" +
		"203ea7e0b19560d7c0b0f5734f63b955286dfa8232b5ebe63324e2d9e7433f725803414462",
	iskInput: "15435061636552697374726574746f3235355f49534b107e4b4791d6a8ef019b936c79fb7f2c57" +
		"2080b69a8a76457ab6a4d7f887a4bf6b55a2f80ac19c333f917a05fc9887c8b40f" +
		"20d6bac480f2c386c394efc7c47adb9925dcd2630b64f240c50f8d0eec482b915703414461203ea7e0b19560d7c0b0f5734f63b955286dfa8232b5ebe63324e2d9e7433f725803414462",
	iskIR:     "b69effbf61b51d56401c0f65601abe428de8206feaaf0e32198896dcae7b35cd2b38950a39dfd5d4a79164614c2984f7daa460b588c1e80c3fa2068af7900447",
	s:         "7cd0e075fa7955ba52c02759a6c90dbbfc10e6d40aea8d283e407d88cf538a05",
	x:         "2c3c6b8c4f3800e7aef6864025b4ed79bd599117e427c41bd47d93d654b4a51c",
	sx:        "7c13645fe790a468f62c39beb7388e541d8405d1ade69d1778c5fe3e7f6b600e",
	invalid1:  "2b3c6b8c4f3800e7aef6864025b4ed79bd599117e427c41bd47d93d654b4a51c",
	invalid2:  strings.Repeat("00", 32),
	ciDraft18: "6f630b425f726573706f6e6465720b415f696e69746961746f72",
	g18:       "a6fc82c3b8968fbb2e06fee81ca858586dea50d248f0c7ca6a18b0902a30b36b",
}

// unhex decodes a vector, first checking it is in the vectors file.
func unhex(t *testing.T, corpus, h string) []byte {
	t.Helper()
	if !strings.Contains(corpus, h) {
		t.Fatalf("%.24s… is not in %s", h, vectorsFile)
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// vectorCorpus is the vectors file with all white space removed and in
// lower case, so a vector split over lines matches as one string.
func vectorCorpus(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ToLower(strings.Join(strings.Fields(string(raw)), ""))
}

func scalar(t *testing.T, le []byte) *share {
	t.Helper()
	y := r255.NewScalar()
	if err := y.UnmarshalBinary(le); err != nil {
		t.Fatalf("scalar %x: %v", le, err)
	}
	return &share{y: y}
}

func mustEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\n got %x\nwant %x", what, got, want)
	}
}

// TestCPaceDraft21Vectors runs this package's CPace on the draft's inputs
// and matches every output the draft gives for the initiator-responder
// setting: the generator string, its hash and the generator g, Ya and Yb
// from the scalars, K both ways, the transcript, ISK, a valid scalar_mult
// and the two invalid points (G.I, and the protocol aborts).
func TestCPaceDraft21Vectors(t *testing.T) {
	c := vectorCorpus(t)
	v := func(h string) []byte { return unhex(t, c, h) }
	prs, ci, sid := v(draft21.prs), v(draft21.ci), v(draft21.sid)

	mustEqual(t, "generator_string", generatorString(prs, ci, sid), v(draft21.genString))
	h := sha512.Sum512(generatorString(prs, ci, sid))
	mustEqual(t, "generator string hash", h[:], v(draft21.genHash))
	g := calculateGenerator(prs, ci, sid)
	gEnc, _ := g.MarshalBinaryCompress()
	mustEqual(t, "g", gEnc, v(draft21.g))

	a, b := scalar(t, v(draft21.ya)), scalar(t, v(draft21.yb))
	ya, err := shareOf(g, a.y)
	if err != nil {
		t.Fatal(err)
	}
	yb, err := shareOf(g, b.y)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "Ya", ya.enc, v(draft21.yaEnc))
	mustEqual(t, "Yb", yb.enc, v(draft21.ybEnc))

	kA, err := ya.secret(yb.enc)
	if err != nil {
		t.Fatal(err)
	}
	kB, err := yb.secret(ya.enc)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "scalar_mult_vfy(ya,Yb)", kA, v(draft21.k))
	mustEqual(t, "scalar_mult_vfy(yb,Ya)", kB, v(draft21.k))

	tr := transcriptIR(ya.enc, v(draft21.ada), yb.enc, v(draft21.adb))
	mustEqual(t, "transcript_ir", tr, v(draft21.transcriptIR))
	mustEqual(t, "lv_cat(DSI_ISK,sid,K)||transcript_ir", append(lvCat([]byte(dsiISK), sid, kA), tr...), v(draft21.iskInput))
	mustEqual(t, "ISK", sessionKey(sid, kA, tr), v(draft21.iskIR))
}

// TestCPaceDraft21ScalarMult: the draft's valid scalar_mult case, and its
// invalid points — a non-canonical encoding and the neutral element —
// give G.I, and a share carrying either aborts the exchange.
func TestCPaceDraft21ScalarMult(t *testing.T) {
	c := vectorCorpus(t)
	v := func(h string) []byte { return unhex(t, c, h) }
	s := scalar(t, v(draft21.s))
	mustEqual(t, "scalar_mult_vfy(s,X)", scalarMultVfy(s.y, v(draft21.x)), v(draft21.sx))
	for name, bad := range map[string]string{"Y_i1": draft21.invalid1, "Y_i2 (G.I)": draft21.invalid2} {
		mustEqual(t, "scalar_mult_vfy(s,"+name+")", scalarMultVfy(s.y, v(bad)), identityEnc)
		if _, err := s.secret(v(bad)); !errors.Is(err, errBadShare) {
			t.Errorf("a share %s: %v, want the exchange aborted (errBadShare)", name, err)
		}
	}
}

// TestCPaceDraft18ChannelIDDrift: the vectors file warns that revisions
// up to -18 used another test CI; the same code on that CI gives the g it
// quotes, so what differs between the revisions' vectors is the input,
// and the implementation is -21's.
func TestCPaceDraft18ChannelIDDrift(t *testing.T) {
	c := vectorCorpus(t)
	g := calculateGenerator([]byte("Password"), unhex(t, c, draft21.ciDraft18), unhex(t, c, draft21.sid))
	enc, _ := g.MarshalBinaryCompress()
	if hex.EncodeToString(enc) != draft21.g18 {
		t.Errorf("g on the -18 CI: %x, want %s", enc, draft21.g18)
	}
}

// TestCPaceDraft21StringUtilities: prepend_len, lv_cat and transcript_ir
// as the draft's appendix gives them.
func TestCPaceDraft21StringUtilities(t *testing.T) {
	c := vectorCorpus(t)
	v := func(h string) []byte { return unhex(t, c, h) }
	r := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}
	mustEqual(t, `prepend_len("")`, prependLen(nil, nil), v("00"))
	mustEqual(t, `prepend_len("1234")`, prependLen(nil, []byte("1234")), v("0431323334"))
	mustEqual(t, "prepend_len(range(127))", prependLen(nil, r(127)), append([]byte{0x7f}, r(127)...))
	mustEqual(t, "prepend_len(range(128))", prependLen(nil, r(128)), append([]byte{0x80, 0x01}, r(128)...))
	if !strings.Contains(c, "7f000102") || !strings.Contains(c, "8001000102") {
		t.Error("the prepend_len(range) vectors are not in the file as expected")
	}
	mustEqual(t, "lv_cat", lvCat([]byte("1234"), []byte("5"), nil, []byte("678")), v("043132333401350003363738"))
	mustEqual(t, "transcript_ir 1", transcriptIR([]byte("123"), []byte("PartyA"), []byte("234"), []byte("PartyB")), v("03313233065061727479410332333406506172747942"))
	mustEqual(t, "transcript_ir 2", transcriptIR([]byte("3456"), []byte("PartyA"), []byte("2345"), []byte("PartyB")), v("043334353606506172747941043233343506506172747942"))
}
