// Package models is Unsay's vocabulary: scopes, audiences, the one table that
// binds a URI scheme to its audience and read scope, care URIs, principals,
// fact versions, staleness, spoken ages, the retraction sentence, the MCP
// read contract, announcements, the delivery vocabulary, audio clips and
// the speech limits.
//
// It does no I/O and imports only the standard library, so every other
// package — the store, the MCP server, the speech principal and the Alexa
// skill — can share it without depending on one another.
//
// # Invariants
//
// The properties the code holds, cited in comments as P-n. Each is
// asserted by the tests named with it, each of which fails when the
// property is broken; TestInvariants_EveryListedTestExists fails when a
// name listed here no longer names a test in the module.
//
//   - P-1. Assistant-only content is unreachable by a principal without
//     care.read.assistant: two checks, the URI scheme's scope and the
//     record's own audience. Tests: TestRead_P1_UserPrincipalCannotReachAssistantRecordsByEitherScheme,
//     TestRead_P1_SchemeMustMatchTheRecordsOwnAudience, TestList_P1_FiltersByScopeBeforeAnythingElse,
//     TestPrincipal_P1_ReadScopeFollowsTheAudience, TestNotifications_UserSessionNeverSeesAnInternalURI.
//   - P-2. Forbidden, absent, malformed and missing-version URIs are
//     indistinguishable to the caller: the same JSON-RPC error (-32002 on
//     MCP 2025-11-25, -32602 on 2026-07-28, whose clients accept both) and
//     the same message shape on every channel — read, list, pagination,
//     subscribe and subscriptions/listen, both notification channels,
//     replay after Last-Event-ID, /verify. Tests: TestRead_P2_ForbiddenAbsentMalformedAndMissingVersionAreIndistinguishable,
//     TestErrorShapes_P2_EveryChannelAnswersTheSameGoldenShapes, TestRead_EveryFailureIsTheSameNotFound,
//     TestSubscribe_RefusesNonCanonicalAndUnreadable, TestVerify_UnreadableURIIs404WithTheSameShapeAsAnAbsentOne.
//   - P-3. A domain's audience never changes; a write that tries is
//     refused before any state changes (409). Tests:
//     TestPublish_P3_AudienceChangeRefusedBeforeAnyStateChanges, TestWrite_AudienceChangeIs409AndWritesNothing.
//   - P-4. No authorization decision reads an annotation or a priority;
//     the control is scheme + scope, decided from the stored record.
//     Tests: TestRead_P4_PriorityIsAHintThatNoDecisionReads, TestPartitions_OneRowPerSchemeAndAudience.
//   - P-5. versionHash = SHA-256(prevHash ‖ canonical JSON(value) ‖
//     writtenAt ‖ authorId) over plaintext; Verify returns intact or the
//     first version that disagrees. Tests: TestVersionHash_PinnedTestVectors,
//     TestVerify_P5_IntactChainAfterSeedAndRevision, TestVerify_P5_BrokenLinkIsLocatedAtTheLaterVersion,
//     TestVerify_P5_TamperedVersionOneIsLocatedAtBrokenAtOne,
//     TestRead_P5_AVersionChangedInTheDatabaseIsNeverServedNorQuoted, TestRead_P5_AnUntouchedChainIsServedInFull,
//     TestCheckStartup_P5_RefusesAChainWhoseVersionNoLongerMatchesItsHash,
//     TestRead_P5_AVersionChangedInTheDatabaseIsAnInternalErrorNeverItsWords.
//   - P-6. With an envelope, values are AES-256-GCM sealed with AAD
//     patient|domain|v{n}|audience ("|" reserved); bytes moved to another
//     record, audience or version fail. Tests:
//     TestSeal_P6_ValuesSealedUnderTheirRecordsAADAndHashesOverPlaintext,
//     TestSeal_P6_BytesMovedToAnotherRecordFailToOpenAndBreakTheChain,
//     TestRead_P6_PlaintextRowInASealedStoreFailsClosedAndVerifyLocatesIt, TestStore_DefeatsAudienceRelabelInTheDatabaseFile.
//   - P-7. A fact past its staleAfter is served with "[STALE — …; say this
//     age aloud]" at the start of its text, computed from the server
//     clock. Tests: TestStaleness_P7_StaleOnlyPastStaleAfterWithAgeFromWrittenAt,
//     TestVersion_P7_IsStaleOnlyPastStaleAfter, TestRead_CarriesChainMetaAndStaleHeader.
//   - P-8. Version 1 fires list_changed only (and only once a list has
//     been served); v ≥ 2 fires updated; seeding fires neither. Tests:
//     TestListChanged_SilentForTheSeedAndUntilAListIsServed, TestWatch_StartsAfterTheSeed,
//     TestUpdated_DeliveredToSubscriberAndRereadCarriesRetraction.
//   - P-9. A notification carries a URI, never content; it is
//     re-authorized at send time and again at replay. Tests:
//     TestNotifications_WithheldOnceTheSessionTokenHasExpired,
//     TestReplay_ANarrowedTokenCannotResumeAndUndeliveredFramesReplay,
//     TestReplay_ExpiredResumingTokenGetsEveryURIFrameRedacted, TestFeed_PostgresNotifyCarriesSeqURIVersionNeverTheValue.
//   - P-10. brief_carer is built through a principal narrowed to the
//     speakable scope, even for a dual-scope caller. Tests:
//     TestBriefCarer_HasNoInternalTextEvenForADualScopeCaller, TestPrincipal_NarrowNeverWidens.
//   - P-11. resources/list pages at 3 over URI order with a key cursor; a
//     cursor the server did not issue is -32602. Tests:
//     TestList_PagesAtThreeOverURIOrderWithKeyCursor, TestList_CursorNotIssuedByServerIsInvalidParams.
//   - P-12. /write is authenticated over the raw bytes before parsing
//     (HMAC with a 300 s window, or a bearer token with care.write); a
//     replayed signed write is applied at most once. Tests:
//     TestWrite_BodyMutatedAfterSigningIsRefusedWithAnAuditRowAndNothingWritten,
//     TestWrite_TimestampOutsideThe300SecondWindowIsRefusedOnBothSides,
//     TestWrite_ReplayedSignedWriteIsAppliedOnceAndAnsweredWithTheSameBody,
//     TestWrite_BearerTokenMustHoldWriteBeTheAuthorAndBeBoundToThePatient.
//   - P-13. Scopes come only from a verified token: algorithm pinned,
//     signature, expiry, audience = this server's resource URL (RFC 8707),
//     non-empty scopes. Tests: TestVerify_RefusesEveryBrokenRuleAndAcceptsItsValidTwin,
//     TestVerify_PublicKeyAlgorithmsArePinnedToTheirOwnKey, TestHTTP_BadTokensAre401OnMCP.
//   - P-14. Every write attempt, accepted or refused, appends an audit row
//     {at, actor, uri, outcome, reason, via}; actor is the verified
//     principal; reason is a closed set; rows are HMAC-chained and
//     verifiable. Tests: TestWrite_SignedWriteCommitsTheNextVersionAndAuditsItAsHMAC,
//     TestAuditActor_StaysTheTokenSubject, TestAudit_RefusesAnOpenReasonAndKeepsAttackerBytesOut,
//     TestAuditChain_NamesTheFirstTamperedRow.
//   - P-15. The demo seed is deterministic: the same version hashes on
//     every run. Tests: TestSeed_P15_SameHashesOnEveryRunAtDemoNow, TestSeed_P15_HashesFollowTheGivenClock.
//   - P-16. ui://unsay/echo is a listed MCP resource with the same bytes as
//     /echo.html, and carries no assistant content. Tests:
//     TestEchoCard_IsListedAndReadsTheSameBytesAsEchoHTML, TestEchoHTML_EqualsTheBytesOfGetEchoHTML,
//     TestEcho_MentionsCareInternalOnlyInsideTheFilter.
//   - P-17. The retraction is produced by RenderRetraction from record
//     fields: stop first, name the withdrawn sentence, then the new one
//     with author and age, then a gloss that restates and never advises,
//     said only over words that cannot forbid, end, defer or condition
//     its term (W1) — no symbol, combining mark or digit date, and beside
//     a weight-bearing level no number but a count of walking aids and no
//     "half" but with partial weight-bearing (G1). Tests: TestRenderRetraction_StopFirstThenHeardThenNewWithAuthorAndAge,
//     TestGlosses_NeverAdvise, TestGlosses_FailSafeOnActionWords,
//     TestGlosses_FailSafeOnAnyWordThatIsNotPlainlyAPlaceCountOrTime,
//     TestDemo_TranscriptMatchesTheGolden.
//   - P-18. skill and bridge/speech do not depend on store or bridge; the
//     speech token holds care.read.user only. Tests:
//     TestImports_TheLayersPointOneWay, TestRun_NeverHoldsAnAssistantRecord,
//     TestNew_RefusesASpeechTokenWiderThanTheSpeakableScope.
//   - P-19. A retraction withdraws the version Ray actually heard; none if
//     he never heard an older one; none twice; this survives a restart.
//     What he heard is what was delivered, and what he may have heard (a
//     response offered whose delivery is unconfirmed) is withdrawn too.
//     Tests: TestDecide_WithdrawsWhatRayHeardOrMayHaveHeardOnceAndNeverHisStartingPoint,
//     TestHeardLedger_KeepsTheLedgerContract (SQLite and Postgres: the ledgertest suite),
//     TestMemLedger_KeepsTheLedgerContract, TestHeardLedger_OpensTheLedgerAPreviousBuildCreated,
//     TestLedger_MigrationKeepsOffersRecordedByAnnouncementID,
//     TestRestart_NothingLostAndNothingRepeated, TestRun_OnPostgresNothingLostAndNothingRepeated,
//     TestMainJob_RetractsExactlyWhatRayHeardOnceOverRealSockets,
//     TestMainJob_RetractionSurvivesARestartBetweenWriteAndLaunch,
//     TestRevert_DuringHisTurnTheNextTurnWithdrawsWhatTheTurnSaid,
//     TestRevert_AfterACrashBeforeTheLedgersCommitTheOfferedWordsAreWithdrawnSayingSo,
//     TestOvertaken_ATurnOvertakenByARevisionIsQuotedByTheNextRetraction,
//     TestSpeechRace_AQuickRevertNeverErasesAStopHeWasTold,
//     TestWithdraw_ARetractionFromWordsHeMayHaveHeardAlsoWithdrawsTheWordsHeWasTold,
//     TestSpeechSafety_AnUnfinishedLongRetractionIsWithdrawnByTheWordsRayWasTold.
//   - P-20. An acknowledged write survives kill -9; the chain verifies
//     after restart. Tests: TestPublish_P20_AcknowledgedWritesSurviveKill9,
//     TestDemo_RetractionSurvivesKill9BetweenWriteAndNextTurn.
//   - P-21. A token is bound to its patients; another patient's facts are
//     not found. Tests: TestPrincipal_P21_BoundToItsPatients, TestRead_P21_AnotherPatientsFactsAreNotFound,
//     TestPublish_P21_WriterMustBeBoundToThePatient, TestSession_RefusesATokenOfAnyOtherPrincipal.
//   - P-22. Every Alexa request is verified before any handler runs:
//     Signature-256 over the raw body, certificate URL rules, chain, SAN
//     echo-api.amazon.com, validity, timestamp within ±150 s, skill id; a
//     failure is HTTP 400. Tests: TestServeHTTP_VerificationVectors, TestServeHTTP_TimestampWindow,
//     TestServeHTTP_RefusesAnotherSkillsID, TestSignedAlexa_RefusesBadRequestsBeforeAnyHandler.
//   - P-23. Unasked speech to Ray (proactive notifications) stays within
//     one budget per patient per hour, reserved atomically before sending,
//     charged unless proven undelivered, deferred in quiet hours. Tests:
//     TestBudget_RefusesPastMaxAndRecoversAsTheWindowSlides, TestBudget_TwoRacingReservationsWithOneSlotLeftGetOne,
//     TestBudget_OnPostgresTwoInstancesRacingForTheLastSlotGetOne,
//     TestNotifier_RefundsOnlyWhenProvenUndelivered, TestQuietHours_DeferUntilTheWindowEnds,
//     TestLeased_EveryInstanceQueuesOnceButOnlyTheSpeakerTellsRayUnasked.
//   - P-24. Losing or distorting a retraction is worse than repeating one:
//     an announcement is marked heard only after the response carrying it
//     was written in full; a fact that cannot be confirmed current at
//     speak time is not spoken as current; staleness is judged when a fact
//     is spoken, in every form. Tests: TestDelivery_AFailedWriteMarksNothingAndTheNextTurnSpeaksItAgain,
//     TestTurn_ConfirmsAtSpeakTimeSoAFrozenStreamCannotMakeItStale,
//     TestOffered_StaysOwedAndComesBackAgainUntilHeard, TestRender_StaleFormsLeadWithTheAgeAndSayPastReview,
//     TestSpeechSafety_KillBetweenTheResponseWriteAndTheLedgerCommitTheRetractionIsSpokenAgain,
//     TestTurn_ARevisionReadButNotYetQueuedIsARetractionInThisTurn,
//     TestTurn_APendingAnnouncementAheadOfTheTurnsReadIsReadAgain,
//     TestTurn_AFactServedStaleIsStaleAtTheTurnsNowTakenBeforeTheRead,
//     TestStaleness_AVersionServedStaleIsSaidAgeFirstInEveryFormAndOnBothCards,
//     TestLeaving_StopAndCancelEndTheSessionWhileALongRetractionIsOwed,
//     TestMultiPart_APartSayingOnlyTheWithdrawnWordsOffersNothingAndOneCarryingTheNewWordsOffersThem,
//     TestMultiPart_TheScreenShowsTheRetractionCardFromTheFirstPartAndItsNewWordsAreOffered,
//     TestSpeechSafety_ALateErrorReportNeverRollsBackPastALaterDelivery,
//     TestServeHTTP_AReplayedRequestIsRefusedAndUsesUpNothing,
//     TestSpeechRace_ARevisionDuringRaysTurnWithdrawsWhatTheTurnSaid,
//     TestSpeechRace_AQuestionRightAfterAWriteHearsTheRetraction,
//     TestSpeechReplay_ACapturedSignedRequestReplayedIsRefusedAndRaysNextTurnHearsTheRetraction,
//     TestDelivery_AResponseWrittenIntoAClosedConnectionIsNotHeard,
//     TestTold_ACrashAfterAPlainAnswerLeavesItOfferedSoTheRevisionIsARetraction,
//     TestCard_AFactReadOnTheScreenIsWithdrawnWhenRevised,
//     TestNotPlayed_AnErrorReportMakesTheRetractionOwedAgain,
//     TestAnnouncement_WordsHeMayHaveHeardAreNeverQuotedAsTold,
//     TestOvertaken_ARevisionWhileTheResponseIsHeldIsNotSpokenAsCurrent,
//     TestOvertaken_RevisionsThatKeepOvertakingGiveTheUnconfirmedAnswer,
//     TestSpeechSafety_ARevisionWhileTheResponseIsHeldIsNotSpokenAsCurrent,
//     TestOvertakenMultiPart_ARevisionDuringAHeldPartIsNeverOfferedAsCurrentLater,
//     TestSpeechSafety_ARevisionWhileAPartOfALongRetractionIsHeldRestartsItFromTheNewWords,
//     TestNotPlayed_ATellingOfTheHeardVersionIsReportedAsAConfirmationToUndo,
//     TestNotPlayed_BothResponsesReportedNotPlayedLeaveTheRetractionOwed,
//     TestSpeechSafety_BothResponsesReportedNotPlayedInEitherOrderLeaveTheRetractionOwed,
//     the ledger contract's ARevisionBetweenNotPlayedReportsStillRollsBackToWhatHeLastHeardForCertain
//     (T8: a revision settling heard between the reports, or between a response and its report),
//     TestSpeechSafety_ARevisionBetweenTwoNotPlayedReportsStillWithdrawsFromWhatRayLastHeardForCertain,
//     the ledger contract's ARepeatedReportOfAResponseChangesNothingALaterDeliveryConfirmed
//     (TestHeardLedger_KeepsTheLedgerContract, TestMemLedger_KeepsTheLedgerContract),
//     TestNotPlayed_EachResponsesReportCarriesItsOwnResponseID,
//     TestNotPlayed_ARepeatedReportOfOneResponseReopensNothingDeliveredSince,
//     TestSpeechSafety_ARepeatedNotPlayedReportForAResponseChangesNothingALaterDeliveryConfirmed,
//     the ledger contract's ARetractionToldOnlyPlainlySinceIsOwedAgainWhenReportedNotPlayed
//     (U2: a plain telling of the new words is no delivery of the retraction),
//     TestSpeechSafety_ALateErrorReportForARetractionToldOnlyPlainlySinceBringsItBack,
//     TestDecide_WithdrawsWhatRayHeardOrMayHaveHeardOnceAndNeverHisStartingPoint (two offers in a row),
//     TestHeardLedger_KeepsTheLedgerContract and TestMemLedger_KeepsTheLedgerContract
//     (TwoUnconfirmedOffersInARowAreBothKeptToWithdraw, AConfirmedOfferClearsTheOffersUpToIt),
//     TestAnnouncement_ARetractionWithdrawsEveryWordingHeMayHaveHeardTheNewestQuoted,
//     TestWithdraw_TwoUnconfirmedOffersInARowAreBothWithdrawn,
//     TestCard_ARetractionAfterTwoUnconfirmedDeliveriesWithdrawsBothOnTheVoiceAndTheCard,
//     TestSpeechSafety_TwoUnconfirmedDeliveriesInARowAreBothWithdrawnByTheNextRevision,
//     TestNotPlayed_AReportCarryingAnEarlierResponsesAttributesOrNoneReopensTheLastResponsesMarks,
//     TestNotPlayed_AttributesThatDisagreeWithTheRecordOfTheSameResponseAreOverruledByIt,
//     TestNotPlayed_AReportThatOvertakesTheResponsesWriteStillReopensIt,
//     TestSpeechSafety_AnErrorReportWithoutTheFailedResponsesAttributesStillBringsItsRetractionBack,
//     TestSpeechSafety_AnErrorReportEchoingAnEarlierResponseReopensTheLastOneToo,
//     TestNotPlayed_AReportOnAnInstanceThatDidNotWriteTheResponseReopensItsMarksFromTheLedger,
//     TestNotPlayed_TheLedgersRecordOfAResponseIsWhatItsAttributesName,
//     TestNotPlayed_AnAttemptOvertakenBeforeItsWriteLeavesNoRecordOfItsOwn,
//     TestNotPlayed_AMalformedSessionIDIsRecordedInMemoryOnlyAndTheResponseStillSent,
//     TestOfferedResponse_RefusesAMalformedRecordWholeAndKeepsAWellFormedOne,
//     TestSpeechSafety_AnErrorReportAfterARestartStillOwesTheRetractionItsResponseCarried,
//     TestTwoInstances_AnErrorReportOnTheOtherInstanceStillOwesTheRetraction,
//     TestWrite_ANewTopicWhoseSpokenNameIsAnotherTopicsIsRefused,
//     TestCarePlan_TwoStoredTopicsOfOneSpokenNameAreNeverBothSaid (V2: two instructions Ray
//     calls by one name are never both said as current)
//     (U8: the record of each response's marks is the heard ledger's, written with its
//     offers; the ledger contract's AResponsesRecordIsReadOnAnotherInstanceWithItsMarks,
//     TheRecordKeepsTheLastTwoResponsesOfEachSession, TheRecordOfAResponseExpiresAfterADay),
//     TestDelivery_AResponseLaterThanAlexasDeadlineIsNotHeard (its report re-opens nothing),
//     the ledger contract's OneReportOfTheLastAndAnEarlierResponseRollsBackPastBothInEitherOrder,
//     UnplayedRetractionsReportedInTheirOwnOrderRollBackToWhatHeLastHeardForCertain,
//     EveryWordingOfSeveralUnplayedRetractionsInARowStaysWithdrawn,
//     TheTimelineNeverShowsAsHeardAVersionWhoseDeliveriesWereAllReportedNotPlayed,
//     TestSpeechSafety_TwoUnplayedRetractionsReportedInEitherOrderWithdrawWhatRayLastHeardForCertain,
//     TestSpeechSafety_EveryWordingOfSeveralUnplayedRetractionsInARowIsWithdrawn (G8, G5),
//     TestBrowser_AnExpiredLinkStopsShowingTheInstructionsAsCurrent (the Echo Show card and
//     the clinician page, whose token expired, stop showing the instructions as current),
//     TestCard_ARowShownCutIsMarkedSoNotToldButOffered, TestCard_ACutRowOfACardNotSentIsNotOffered,
//     TestSpeechSafety_ARowTheCareCardShowedCutIsWithdrawnWhenRevised,
//     TestLongValue_ARetractionOfLongWordsSaysTheNewWordsInItsFirstPart,
//     TestShortenWithdrawn_CutsLongWordsAtAWordOrClusterBoundaryAndKeepsShortOnesWhole,
//     TestCutTextFrom_APartThatReachesTheNewWordsSaysSomeOfThem,
//     TestAnnouncement_RenderShortenedSaysAShortenedWithdrawnQuoteWasShortened,
//     TestSpeechSafety_AnUnfinishedLongRetractionIsWithdrawnByTheWordsRayWasTold (T9: v9 begun in part 1),
//     TestMore_TheRestOfACutAnswerAfterAnInsertedAnnouncementIsIntroducedAgain,
//     TestRepeat_ARepeatedContinuationAfterAnInsertedAnnouncementIsIntroducedAgain,
//     TestResume_EveryCutOfARetractionIsIntroducedAgainWithItsQuotationsBalanced,
//     TestSpeechSafety_TheRestOfACutRetractionAfterANewRetractionIsIntroducedAgain (U5),
//     TestLinkDevice_ARefusalOnAKnownPatientsDeviceSaysTheOwedRetractionFirst,
//     TestLinkDevice_ARefusalWhenTheNotesCannotBeConfirmedSaysNothingAsCurrent (U4),
//     TestTick_ARetractionSpokenUnaskedIsOfferedNotHeard,
//     TestTick_ALaterTickDoesNotRepeatWhatAnEarlierSpokeButSpeaksANewRevision,
//     TestTick_ALongRetractionATickBeganIsNotBegunAgainByTheNextTick,
//     TestTick_AnAskedResponseThatWasNotDeliveredIsSpokenByTheNextTick,
//     TestRepeat_AfterATickSpokeARetractionItIsSaidOnce,
//     TestSpeechSafety_ARetractionTheCardsTickSpokeUnaskedIsSaidAgainAtRaysNextTurn (U10),
//     TestKeptReports_AReportTheStoreCouldNotTakeIsAppliedOnceItCommitsAndNothingIsSaidAsCurrentMeanwhile,
//     TestKeptReports_AKeptReportIsAppliedByItsRetryTimerWithoutATurn,
//     TestKeptReports_AReportWhoseMarksWereRefusedIsNotKept,
//     TestKeptReports_ReportsBeyondTheBoundOrKeptAtCloseAreCountedLost,
//     TestKeptReports_AReportKeptWhenTheServerDiesIsAppliedAfterItStartsAgain,
//     TestKeptReports_AReportKeptAtCloseIsLostOnlyWhenItsFileCouldNotHoldIt,
//     TestKeptReports_ANewSkillRefusesAKeptReportsFileItCannotRead,
//     TestKeptReports_AReportIsSavedBeforeItsFirstLedgerAttemptCanWait,
//     TestKeptReports_ASaveThatFailedIsMadeGoodOnARetry,
//     TestSpeechSafety_AnErrorReportThatMeetsALockedDatabaseStillOwesTheRetraction
//     (V5: an error report the store cannot commit is kept and applied once it commits;
//     meanwhile nothing is said as current).
//   - P-25. No client delays another: each session has its own bounded
//     outgoing queue and write deadline; a session that cannot keep up is
//     closed, never the speech principal's delivery. Tests:
//     TestFanOut_AStalledReaderDelaysNoOtherSessionAndIsClosed,
//     TestFanOut_AStalledReaderDelaysNoSessionNorTheSpeechPrincipal;
//     and no client crowds out Alexa's turn at the connection cap (G11):
//     TestServe_HalfSentHeadersAndIdleKeepAlivesDoNotKeepARequestOut,
//     TestListen_OnePrincipalHoldsAtMostMaxListensStreams.
//   - P-26. Each chain head and the audit log's head are signed at commit
//     with a key that is not in the database; a rewritten chain with
//     recomputed hashes fails verification. Tests:
//     TestVerify_P26_RewrittenChainWithRecomputedHashesFailsOnItsHeadSignature,
//     TestVerifyAudit_P26_RecomputedAuditChainFailsOnItsHeadSignature,
//     TestCheckStartup_P26_RefusesAnotherKeyAndTheDevelopmentKey,
//     TestVerify_P26_ShowsTheSignedHeadAndFailsARewrittenChain.
package models
