#!/usr/bin/perl
# A test SMSC on Net::SMPP (Debian libnet-smpp-perl), run as its own process by the tests
# (test/helpers/smsc.ts). One process, one IO::Select loop over the listening socket, the bound
# sessions and stdin. Same line protocol as test/peers/smsc-node.ts:
#
#   argv: <port (0 = any)> <system_id> <password>
#   stdout (JSON lines): listening, bind, submit, refused, held, deliver_resp, enquire_link events
#   stdin (JSON lines): throttle, refuse, receipt_stat, receipt_delay, hold, mo commands
#
# Receipts are the Appendix B text only (no TLVs), sent on a receiver-capable session of the account;
# one answered with an error status is sent again 300 ms later (at most 20 times).
use strict;
use warnings;
use IO::Select;
use IO::Handle;
use JSON::PP;
use Time::HiRes qw(time);
use POSIX qw(strftime);
use Net::SMPP;

my ($port, $system_id, $password) = (@ARGV, 0, 'test', 'secret')[0 .. 2];
$port ||= 0;
STDOUT->autoflush(1);
my $json = JSON::PP->new->utf8->canonical;
sub out { print $json->encode($_[0]), "\n"; }

my $listener = Net::SMPP->new_listen('127.0.0.1', port => $port, smpp_version => 0x34, listen => 64)
  or die "cannot listen: $!";
out({ event => 'listening', port => $listener->sockport });

my $select = IO::Select->new($listener, \*STDIN);
my %sessions;        # fileno => { conn, bound, receives }
my ($throttle_count, $throttle_status, $hold) = (0, 0x58, 0);
my $receipt_delay = 0.02;
my (%refusals, %receipt_stats);
my $next_id = 1;
my $next_ref = 1;
my @timers;          # [when, code]
my %awaiting;        # "fileno:seq" => { kind, args, tries }
my @pending;         # deliveries waiting for a receiver

my %states = (DELIVRD => 2, EXPIRED => 3, DELETED => 4, UNDELIV => 5, ACCEPTD => 6, UNKNOWN => 7, REJECTD => 8);

sub receiver {
  for my $s (values %sessions) { return $s if $s->{bound} && $s->{receives}; }
  return undef;
}

sub deliver {
  my ($kind, $args, $tries) = @_;
  my $s = receiver();
  if (!$s) { push @pending, [$kind, $args, $tries]; return; }
  my $seq = $s->{conn}->deliver_sm(%$args, async => 1);
  $awaiting{ fileno($s->{conn}) . ":$seq" } = { kind => $kind, args => $args, tries => $tries };
}

sub drop {
  my ($fh) = @_;
  $select->remove($fh);
  delete $sessions{ fileno($fh) };
  close $fh;
}

sub on_submit {
  my ($s, $pdu) = @_;
  my $c = $s->{conn};
  my $to = $pdu->{destination_addr};
  if ($hold > 0) {
    $hold--;
    out({ event => 'held', to => $to });
    if ($hold == 0) { push @timers, [time + 0.05, sub { drop($_->{conn}) for values %sessions; }]; }
    return;
  }
  if ($throttle_count > 0) {
    $throttle_count--;
    out({ event => 'refused', to => $to, status => $throttle_status });
    $c->submit_sm_resp(message_id => '', seq => $pdu->{seq}, status => $throttle_status);
    return;
  }
  if (exists $refusals{$to}) {
    out({ event => 'refused', to => $to, status => $refusals{$to} });
    $c->submit_sm_resp(message_id => '', seq => $pdu->{seq}, status => $refusals{$to});
    return;
  }
  my $id = sprintf('P%08d', $next_id++);
  my $sar = defined $pdu->{sar_msg_ref_num}
    ? [unpack('n', $pdu->{sar_msg_ref_num}), unpack('C', $pdu->{sar_total_segments}), unpack('C', $pdu->{sar_segment_seqnum})]
    : undef;
  out({ event => 'submit', id => $id, from => $pdu->{source_addr}, to => $to, data_coding => $pdu->{data_coding},
        esm_class => $pdu->{esm_class}, registered_delivery => $pdu->{registered_delivery},
        short_message => unpack('H*', $pdu->{short_message}), sar => $sar });
  $c->submit_sm_resp(message_id => $id, seq => $pdu->{seq});
  return unless $pdu->{registered_delivery} & 1;
  my $stat = $receipt_stats{$to} // 'DELIVRD';
  my $now = strftime('%y%m%d%H%M', gmtime);
  my $text = sprintf('id:%s sub:001 dlvrd:%s submit date:%s done date:%s stat:%s err:%s text:',
    $id, $stat eq 'DELIVRD' ? '001' : '000', $now, $now, $stat, $stat eq 'DELIVRD' ? '000' : '005');
  my %args = (source_addr_ton => $pdu->{dest_addr_ton}, source_addr_npi => $pdu->{dest_addr_npi}, source_addr => $to,
              dest_addr_ton => $pdu->{source_addr_ton}, dest_addr_npi => $pdu->{source_addr_npi}, destination_addr => $pdu->{source_addr},
              esm_class => 0x04, data_coding => 0, short_message => $text);
  push @timers, [time + $receipt_delay, sub { deliver('receipt', \%args, 0); }];
}

sub on_pdu {
  my ($s, $pdu) = @_;
  my $c = $s->{conn};
  my $cmd = $pdu->{cmd};
  if ($cmd == 0x00000009 || $cmd == 0x00000002 || $cmd == 0x00000001) {
    my $type = $cmd == 0x09 ? 'transceiver' : $cmd == 0x02 ? 'transmitter' : 'receiver';
    my $ok = ($pdu->{system_id} // '') eq $system_id && ($pdu->{password} // '') eq $password;
    my $method = "bind_${type}_resp";
    $c->$method(system_id => 'PERLSMSC', seq => $pdu->{seq}, status => $ok ? 0 : 0x0e);
    out({ event => 'bind', type => $type, ok => $ok ? JSON::PP::true : JSON::PP::false });
    if (!$ok) { push @timers, [time + 0.02, sub { drop($c) if $sessions{ fileno($c) // -1 }; }]; return; }
    $s->{bound} = 1;
    $s->{receives} = $cmd != 0x02;
    if ($s->{receives}) { my @p = @pending; @pending = (); deliver(@$_) for @p; }
  } elsif ($cmd == 0x00000004) {
    on_submit($s, $pdu);
  } elsif ($cmd == 0x00000015) {
    $c->enquire_link_resp(seq => $pdu->{seq});
    out({ event => 'enquire_link' });
  } elsif ($cmd == 0x00000006) {
    $c->unbind_resp(seq => $pdu->{seq});
    drop($c);
  } elsif ($cmd == 0x80000005) {
    my $key = fileno($c) . ":$pdu->{seq}";
    my $w = delete $awaiting{$key} or return;
    out({ event => 'deliver_resp', kind => $w->{kind}, status => $pdu->{status} });
    if ($pdu->{status} != 0 && $w->{tries} < 20) {
      push @timers, [time + 0.3, sub { deliver($w->{kind}, $w->{args}, $w->{tries} + 1); }];
    }
  } elsif (!($cmd & 0x80000000)) {
    $c->generic_nack(seq => $pdu->{seq}, status => 0x03);
  }
}

sub mo {
  my ($cmd) = @_;
  my $text = $cmd->{text};
  my $bytes;
  if ($cmd->{ucs2}) { $bytes = join('', map { pack('n', ord $_) } split(//, $text)); }
  else { $bytes = join('', map { chr(ord $_) } split(//, $text)); }
  my $segments = $cmd->{segments} || 1;
  my $unit = $cmd->{ucs2} ? 2 : 1;
  my $size = int((length($bytes) / $unit + $segments - 1) / $segments) * $unit;
  my $ref = $next_ref++ & 0xff;
  (my $from = $cmd->{from}) =~ s/^\+//;
  (my $to = $cmd->{to}) =~ s/^\+//;
  for my $i (0 .. $segments - 1) {
    my $chunk = substr($bytes, $i * $size, $size);
    my $udh = $segments > 1 ? pack('C6', 5, 0, 3, $ref, $segments, $i + 1) : '';
    deliver('mo', { source_addr_ton => 1, source_addr_npi => 1, source_addr => $from,
                    dest_addr_ton => 1, dest_addr_npi => 1, destination_addr => $to,
                    esm_class => $segments > 1 ? 0x40 : 0, data_coding => $cmd->{ucs2} ? 8 : 3, short_message => $udh . $chunk }, 0);
  }
}

sub on_command {
  my ($line) = @_;
  return unless $line =~ /\S/;
  my $cmd = $json->decode($line);
  my $c = $cmd->{cmd};
  if ($c eq 'throttle') { $throttle_count = $cmd->{count}; $throttle_status = $cmd->{status} // 0x58; }
  elsif ($c eq 'refuse') { (my $to = $cmd->{to}) =~ s/^\+//; $refusals{$to} = $cmd->{status}; }
  elsif ($c eq 'receipt_stat') { (my $to = $cmd->{to}) =~ s/^\+//; $receipt_stats{$to} = $cmd->{stat}; }
  elsif ($c eq 'receipt_delay') { $receipt_delay = $cmd->{ms} / 1000; }
  elsif ($c eq 'hold') { $hold = $cmd->{count}; }
  elsif ($c eq 'mo') { mo($cmd); }
  out({ event => 'ok', cmd => $c });
}

my $stdin_buf = '';
while (1) {
  @timers = sort { $a->[0] <=> $b->[0] } @timers;
  my $wait = @timers ? $timers[0][0] - time : 0.5;
  $wait = 0 if $wait < 0;
  for my $fh ($select->can_read($wait)) {
    if ($fh == $listener) {
      my $c = $listener->accept or next;
      $select->add($c);
      $sessions{ fileno($c) } = { conn => $c, bound => 0, receives => 0 };
    } elsif ($fh == \*STDIN) {
      my $n = sysread(STDIN, my $chunk, 65536);
      exit 0 unless $n;
      $stdin_buf .= $chunk;
      while ($stdin_buf =~ s/^(.*)\n//) { on_command($1); }
    } else {
      my $s = $sessions{ fileno($fh) } or next;
      my $pdu = $fh->read_pdu();
      if (!$pdu) { drop($fh); next; }
      on_pdu($s, $pdu);
    }
  }
  while (@timers && $timers[0][0] <= time) { my $t = shift @timers; $t->[1]->(); }
}
