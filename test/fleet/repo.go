package fleet

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// AptRepo returns the files of a flat apt repository ("deb [trusted=yes]
// copy:/DIR ./") holding the given .deb files: the packages themselves,
// Packages and Release, by file name.
func AptRepo(debs ...string) (map[string][]byte, error) {
	files := map[string][]byte{}
	var idx strings.Builder
	for _, deb := range debs {
		b, err := os.ReadFile(deb)
		if err != nil {
			return nil, err
		}
		control, err := exec.Command("dpkg-deb", "--field", deb).Output()
		if err != nil {
			return nil, fmt.Errorf("dpkg-deb --field %s: %w", deb, err)
		}
		name := filepath.Base(deb)
		files[name] = b
		md, s1, s256 := md5.Sum(b), sha1.Sum(b), sha256.Sum256(b)
		idx.WriteString(strings.TrimRight(string(control), "\n") + "\n")
		fmt.Fprintf(&idx, "Filename: ./%s\nSize: %d\nMD5sum: %s\nSHA1: %s\nSHA256: %s\n\n",
			name, len(b), hex.EncodeToString(md[:]), hex.EncodeToString(s1[:]), hex.EncodeToString(s256[:]))
	}
	packages := []byte(idx.String())
	files["Packages"] = packages
	sum := sha256.Sum256(packages)
	files["Release"] = []byte(fmt.Sprintf("Origin: xlb-fleet-lab\nLabel: xlb-fleet-lab\nDate: %s\nSHA256:\n %s %d Packages\n",
		time.Now().UTC().Format(time.RFC1123), hex.EncodeToString(sum[:]), len(packages)))
	return files, nil
}

// FileSHA256 is the hex SHA-256 of a file.
func FileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}
