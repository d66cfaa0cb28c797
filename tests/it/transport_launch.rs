// (placeholder: filled by the transport_launch work)
