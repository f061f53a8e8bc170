// HCI
