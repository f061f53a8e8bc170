#ifndef BEACONBRIDGE_CBLUEZ_SHIM_H
#define BEACONBRIDGE_CBLUEZ_SHIM_H
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>

/* The HCI filter macros, as functions Swift can call. */
static inline void bb_hci_filter_clear(struct hci_filter *f) { hci_filter_clear(f); }
static inline void bb_hci_filter_set_ptype(int t, struct hci_filter *f) { hci_filter_set_ptype(t, f); }
static inline void bb_hci_filter_set_event(int e, struct hci_filter *f) { hci_filter_set_event(e, f); }
static inline int bb_hci_devinfo_is_up(const struct hci_dev_info *di) { return hci_test_bit(HCI_UP, &di->flags); }
static inline unsigned long bb_HCIDEVUP(void) { return HCIDEVUP; }
static inline unsigned long bb_HCIDEVDOWN(void) { return HCIDEVDOWN; }
static inline unsigned long bb_HCIGETDEVINFO(void) { return HCIGETDEVINFO; }
#endif
