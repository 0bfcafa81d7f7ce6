package dataplane

import "fmt"

// enumNames names the values of one of bpf/layout.h's enums for logs and
// errors; a value without a name reads kind(value).
type enumNames[T ~uint8 | ~uint16 | ~uint32] struct {
	kind  string
	names map[T]string
}

func (n enumNames[T]) of(v T) string {
	if s, ok := n.names[v]; ok {
		return s
	}
	return fmt.Sprintf("%s(%d)", n.kind, v)
}
