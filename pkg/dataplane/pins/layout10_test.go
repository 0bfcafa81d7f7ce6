package pins

import (
	"bytes"
	"encoding/binary"
	"testing"
	"unsafe"
)

// The layout 10 -> 11 step's converters (layout10.go).

func TestLayout10Reaped(t *testing.T) {
	for _, c := range []struct{ old, want uint32 }{
		{0, 0}, {7, 7}, // member 0
		{8, 16}, {15, 23}, // member 1
		{4095*ReapedReasons10 + 6, 4095*16 + 6},
	} {
		out, err := reapedFrom10(binary.NativeEndian.AppendUint32(nil, c.old))
		if err != nil {
			t.Fatal(err)
		}
		if got := binary.NativeEndian.Uint32(out); got != c.want {
			t.Errorf("reaped cell %d of layout 10 -> %d, want %d", c.old, got, c.want)
		}
	}
	if _, err := reapedFrom10(make([]byte, 8)); err == nil {
		t.Error("an 8-byte key was converted")
	}
}

func TestLayout10Services(t *testing.T) {
	old := make([]byte, Service10Size)
	for i := range old {
		old[i] = byte(i + 1)
	}
	out, err := serviceFrom10(nil, old)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != int(unsafe.Sizeof(xlbService{})) || !bytes.Equal(out[:Service10Size], old) || !bytes.Equal(out[Service10Size:], make([]byte, 8)) {
		t.Fatalf("layout 10 record -> % x", out)
	}
	if _, err := serviceFrom10(nil, make([]byte, 96)); err == nil {
		t.Error("a 96-byte record was converted")
	}
}
