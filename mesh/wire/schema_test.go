package wire

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// schema is the mesh wire format written as a protobuf schema (proto3), the equivalent of:
//
//	message Member    { string name = 1; string addr = 2; uint32 status = 3; uint64 incarnation = 4; }
//	message Ping      { string from = 1; string target = 2; repeated Member members = 3; }
//	message Ack       { string from = 1; bool ok = 2; repeated Member members = 3; }
//	message PingReq   { string from = 1; Member target = 2; repeated Member members = 3; }
//	message Entry     { string key = 1; bytes value = 2; uint64 lamport = 3; string replica = 4; bool deleted = 5; }
//	message Version   { string key = 1; uint64 lamport = 2; string replica = 3; }
//	message TreeDelta { string model = 1; uint32 kind = 2; fixed64 hash = 3; string worker = 4; bytes path = 5; }
//	message RepairRequest { uint64 id = 1; string model = 2; uint32 kind = 3; uint64 cursor = 4; }
//	message PageEntry { bytes path = 1; repeated string workers = 2; }
//	message RepairPage { uint64 id = 1; string model = 2; uint32 kind = 3; uint64 cursor = 4; uint64 next = 5; repeated PageEntry entries = 6; }
//	message Sync      { string from = 1; repeated Entry entries = 2; repeated Version acks = 3;
//	                    repeated TreeDelta deltas = 4; repeated RepairRequest requests = 5; repeated RepairPage pages = 6; }
//
// TestProtobufReadsTheWireFormat checks it against the codec with protobuf's own decoder.
func schema(t *testing.T) protoreflect.FileDescriptor {
	type T = descriptorpb.FieldDescriptorProto_Type
	const (
		str, byt, u32, u64, boo, f64, msg = descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_TYPE_BYTES,
			descriptorpb.FieldDescriptorProto_TYPE_UINT32, descriptorpb.FieldDescriptorProto_TYPE_UINT64, descriptorpb.FieldDescriptorProto_TYPE_BOOL,
			descriptorpb.FieldDescriptorProto_TYPE_FIXED64, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
	)
	type field struct {
		name     string
		typ      T
		repeated bool
		of       string // the message type of a message field
	}
	message := func(name string, fields ...field) *descriptorpb.DescriptorProto {
		d := &descriptorpb.DescriptorProto{Name: proto.String(name)}
		for i, f := range fields {
			label := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
			if f.repeated {
				label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED
			}
			fd := &descriptorpb.FieldDescriptorProto{Name: proto.String(f.name), Number: proto.Int32(int32(i + 1)), Type: f.typ.Enum(), Label: label.Enum()}
			if f.of != "" {
				fd.TypeName = proto.String(".smg.mesh." + f.of)
			}
			d.Field = append(d.Field, fd)
		}
		return d
	}
	members := field{"members", msg, true, "Member"}
	file := &descriptorpb.FileDescriptorProto{
		Name: proto.String("smg/mesh.proto"), Package: proto.String("smg.mesh"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			message("Member", field{"name", str, false, ""}, field{"addr", str, false, ""}, field{"status", u32, false, ""}, field{"incarnation", u64, false, ""}),
			message("Ping", field{"from", str, false, ""}, field{"target", str, false, ""}, members),
			message("Ack", field{"from", str, false, ""}, field{"ok", boo, false, ""}, members),
			message("PingReq", field{"from", str, false, ""}, field{"target", msg, false, "Member"}, members),
			message("Entry", field{"key", str, false, ""}, field{"value", byt, false, ""}, field{"lamport", u64, false, ""}, field{"replica", str, false, ""}, field{"deleted", boo, false, ""}),
			message("Version", field{"key", str, false, ""}, field{"lamport", u64, false, ""}, field{"replica", str, false, ""}),
			message("TreeDelta", field{"model", str, false, ""}, field{"kind", u32, false, ""}, field{"hash", f64, false, ""}, field{"worker", str, false, ""}, field{"path", byt, false, ""}),
			message("RepairRequest", field{"id", u64, false, ""}, field{"model", str, false, ""}, field{"kind", u32, false, ""}, field{"cursor", u64, false, ""}),
			message("PageEntry", field{"path", byt, false, ""}, field{"workers", str, true, ""}),
			message("RepairPage", field{"id", u64, false, ""}, field{"model", str, false, ""}, field{"kind", u32, false, ""}, field{"cursor", u64, false, ""}, field{"next", u64, false, ""}, field{"entries", msg, true, "PageEntry"}),
			message("Sync", field{"from", str, false, ""}, field{"entries", msg, true, "Entry"}, field{"acks", msg, true, "Version"},
				field{"deltas", msg, true, "TreeDelta"}, field{"requests", msg, true, "RepairRequest"}, field{"pages", msg, true, "RepairPage"}),
		},
	}
	fd, err := protodesc.NewFile(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// unknownFields reports whether m or any message inside it holds fields its schema does not
// declare (or declares with another wire type): protobuf keeps those as unknown bytes.
func unknownFields(m protoreflect.Message) bool {
	if len(m.GetUnknown()) > 0 {
		return true
	}
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Kind() != protoreflect.MessageKind:
		case fd.IsList():
			for i := 0; i < v.List().Len(); i++ {
				found = found || unknownFields(v.List().Get(i).Message())
			}
		default:
			found = found || unknownFields(v.Message())
		}
		return !found
	})
	return found
}

// TestProtobufReadsTheWireFormat: protobuf's own decoder reads every message the codec
// writes against the schema above with no field left over, and the codec reads back what
// protobuf's encoder writes. So the format is protobuf, and its evolution rules apply.
func TestProtobufReadsTheWireFormat(t *testing.T) {
	fd := schema(t)
	for _, m := range sampleMessages() {
		name := reflect.TypeOf(m).Elem().Name()
		desc := fd.Messages().ByName(protoreflect.Name(name))
		b, err := Encode(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		dyn := dynamicpb.NewMessage(desc)
		if err := proto.Unmarshal(b, dyn); err != nil {
			t.Fatalf("protobuf cannot read a %s: %v", name, err)
		}
		if unknownFields(dyn) {
			t.Fatalf("protobuf finds fields outside the schema in a %s: %v", name, dyn)
		}
		again, err := proto.MarshalOptions{Deterministic: true}.Marshal(dyn)
		if err != nil {
			t.Fatal(err)
		}
		got := newOf(m)
		if err := Decode(again, got); err != nil {
			t.Fatalf("the codec cannot read protobuf's %s: %v", name, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("%s through protobuf:\n got %+v\nwant %+v", name, got, m)
		}
	}
}
